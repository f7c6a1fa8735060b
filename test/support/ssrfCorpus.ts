/**
 * The SSRF corpus shared by the outbound, webhook and telemetry tests: one
 * literal of every non-public address class, the encoded spellings of
 * loopback and metadata addresses, and public addresses that must pass.
 */

/** One literal of every non-public class the guard must refuse. */
export const nonPublicCorpus: ReadonlyArray<readonly [string, string]> = [
  ["this network 0.0.0.0/8", "0.0.0.0"],
  ["this network 0.0.0.0/8", "0.1.2.3"],
  ["loopback 127.0.0.0/8", "127.0.0.1"],
  ["loopback 127.0.0.0/8", "127.255.255.254"],
  ["private 10.0.0.0/8", "10.0.0.1"],
  ["private 172.16.0.0/12", "172.16.0.1"],
  ["private 172.16.0.0/12", "172.31.255.255"],
  ["private 192.168.0.0/16", "192.168.1.1"],
  ["carrier-grade NAT 100.64.0.0/10", "100.64.0.1"],
  ["carrier-grade NAT 100.64.0.0/10 (Alibaba metadata)", "100.100.100.200"],
  ["link-local 169.254.0.0/16 (cloud metadata)", "169.254.169.254"],
  ["IETF protocol assignments 192.0.0.0/24", "192.0.0.170"],
  ["documentation TEST-NET-1 192.0.2.0/24", "192.0.2.1"],
  ["documentation TEST-NET-2 198.51.100.0/24", "198.51.100.7"],
  ["documentation TEST-NET-3 203.0.113.0/24", "203.0.113.9"],
  ["6to4 relay anycast 192.88.99.0/24", "192.88.99.1"],
  ["benchmarking 198.18.0.0/15", "198.19.0.1"],
  ["multicast 224.0.0.0/4", "224.0.0.1"],
  ["multicast 224.0.0.0/4", "239.255.255.250"],
  ["reserved 240.0.0.0/4", "240.0.0.1"],
  ["broadcast", "255.255.255.255"],
  ["IPv6 unspecified", "::"],
  ["IPv6 loopback", "::1"],
  ["IPv4-mapped loopback", "::ffff:127.0.0.1"],
  ["IPv4-mapped private", "::ffff:10.0.0.1"],
  ["IPv4-mapped metadata", "::ffff:169.254.169.254"],
  ["IPv4-compatible ::/96", "::7f00:1"],
  ["IPv4-compatible ::/96 of a public address", "::808:808"],
  ["IPv4-translated ::ffff:0:0:0/96", "::ffff:0:7f00:1"],
  ["NAT64 64:ff9b::/96 of loopback", "64:ff9b::7f00:1"],
  ["NAT64 64:ff9b::/96 of metadata", "64:ff9b::a9fe:a9fe"],
  ["local-use NAT64 64:ff9b:1::/48", "64:ff9b:1::808:808"],
  ["6to4 2002::/16 of loopback", "2002:7f00:1::"],
  ["6to4 2002::/16 of private", "2002:c0a8:101::1"],
  ["Teredo 2001::/32", "2001:0:4136:e378:8000:63bf:3fff:fdd2"],
  ["IETF protocol assignments 2001::/23", "2001:1::1"],
  ["benchmarking 2001:2::/48", "2001:2::1"],
  ["ORCHIDv2 2001:20::/28", "2001:20::1"],
  ["documentation 2001:db8::/32", "2001:db8::1"],
  ["documentation 3fff::/20", "3fff::1"],
  ["discard-only 100::/64", "100::1"],
  ["unique-local fc00::/7", "fc00::1"],
  ["unique-local fc00::/7", "fd12:3456:789a::1"],
  ["link-local fe80::/10", "fe80::1"],
  ["site-local fec0::/10", "fec0::1"],
  ["multicast ff00::/8", "ff02::1"],
  ["segment routing 5f00::/16", "5f00::1"],
  ["not global unicast (outside 2000::/3)", "4000::1"],
  ["not global unicast (outside 2000::/3)", "1::1"]
]

export const publicCorpus: ReadonlyArray<string> = [
  "8.8.8.8",
  "1.1.1.1",
  "93.184.215.14",
  "100.63.255.255",
  "100.128.0.0",
  "172.15.255.255",
  "172.32.0.0",
  "192.167.255.255",
  "192.169.0.0",
  "2606:4700:4700::1111",
  "2001:4860:4860::8888",
  "::ffff:8.8.8.8",
  "64:ff9b::808:808",
  "2002:808:808::1"
]

/**
 * URLs whose host, after WHATWG normalisation, is loopback or the metadata
 * address: decimal, octal, hex and short IPv4 forms, IPv4-mapped, NAT64 and
 * 6to4 forms, full-width IDN digits.
 */
export const encodedLoopbackUrls: ReadonlyArray<string> = [
  "https://2130706433/",
  "https://0177.0.0.1/",
  "https://0x7f.1/",
  "https://0x7f000001/",
  "https://017700000001/",
  "https://127.1/",
  "https://127.0.1/",
  "https://0/",
  "https://[::ffff:127.0.0.1]/",
  "https://[::ffff:7f00:1]/",
  "https://[0:0:0:0:0:ffff:7f00:1]/",
  "https://[64:ff9b::7f00:1]/",
  "https://[64:ff9b::127.0.0.1]/",
  "https://[2002:7f00:1::]/",
  "https://[::127.0.0.1]/",
  "https://[::1]/",
  "https://[::]/",
  "https://169.254.169.254/latest/meta-data/",
  "https://0xa9.0xfe.0xa9.0xfe/",
  "https://2852039166/",
  "https://0251.0376.0251.0376/",
  "https://[::ffff:a9fe:a9fe]/",
  "https://\uff11\uff12\uff17\uff0e\uff10\uff0e\uff10\uff0e\uff11/",
  "https://127.0.0.1.:8443/"
]

/** Names refused by name, before any resolution (spelled as attackers would). */
export const blockedNameUrls: ReadonlyArray<string> = [
  "https://localhost/",
  "https://LOCALHOST./",
  "https://localhost:8443/",
  "https://api.localhost/",
  "https://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/",
  "https://metadata.google.internal/computeMetadata/v1/",
  "https://METADATA.google.internal./",
  "https://metadata/",
  "https://instance-data/",
  "https://instance-data.ec2.internal/"
]
