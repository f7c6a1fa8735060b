import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import ipaddr from "ipaddr.js"
import { classify, inCidrs, judge, parseAddress, parseCidrs } from "../../../src/outbound/AddressPolicy.ts"
import { nonPublicCorpus, publicCorpus } from "../../support/ssrfCorpus.ts"

const address = (text: string) => {
  const parsed = parseAddress(text)
  if (parsed === undefined) throw new Error(`not an address: ${text}`)
  return parsed
}

describe("address classes: every non-public class is refused", () => {
  for (const [range, text] of nonPublicCorpus) {
    it(`${range}: ${text} is not public`, () => {
      const verdict = classify(address(text))
      assert.isFalse(verdict.public, `${text} was judged public`)
    })
  }
  for (const text of publicCorpus) {
    it(`ordinary global unicast ${text} is public`, () => {
      assert.isTrue(classify(address(text)).public)
    })
  }
})

const v4 = (n: number) => ipaddr.fromByteArray([n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff]).toString()
/** Any address inside `cidr` (IPv4), drawn uniformly. */
const inV4Cidr = (cidr: string) => {
  const [network, bits] = ipaddr.parseCIDR(cidr)
  const bytes = network.toByteArray()
  const base = ((bytes[0] << 24) | (bytes[1] << 16) | (bytes[2] << 8) | bytes[3]) >>> 0
  const size = 2 ** (32 - bits)
  return fc.integer({ min: 0, max: size - 1 }).map((offset) => v4((base + offset) >>> 0))
}
const hex16 = fc.integer({ min: 0, max: 0xffff })
/** Any IPv6 address whose first 16-bit group is in [min, max]. */
const v6WithFirstGroup = (min: number, max: number) =>
  fc.tuple(fc.integer({ min, max }), fc.array(hex16, { minLength: 7, maxLength: 7 })).map(([first, rest]) =>
    new ipaddr.IPv6([first, ...rest]).toString()
  )

const nonPublicV4Cidrs = [
  "0.0.0.0/8",
  "10.0.0.0/8",
  "100.64.0.0/10",
  "127.0.0.0/8",
  "169.254.0.0/16",
  "172.16.0.0/12",
  "192.0.0.0/24",
  "192.0.2.0/24",
  "192.168.0.0/16",
  "198.18.0.0/15",
  "198.51.100.0/24",
  "203.0.113.0/24",
  "224.0.0.0/4",
  "240.0.0.0/4"
]

describe("address classes: property tests", () => {
  for (const cidr of nonPublicV4Cidrs) {
    it(`every address in ${cidr} is refused, in every embedding form`, () => {
      fc.assert(
        fc.property(inV4Cidr(cidr), (text) => {
          const inner = ipaddr.IPv4.parse(text)
          const [a, b, c, d] = inner.octets
          const forms = [
            text,
            `::ffff:${text}`,
            `64:ff9b::${text}`,
            `2002:${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}::1`
          ]
          for (const form of forms) assert.isFalse(classify(address(form)).public, form)
        }),
        { numRuns: 200 }
      )
    })
  }

  it("every IPv6 address outside 2000::/3 is refused", () => {
    fc.assert(
      fc.property(fc.oneof(v6WithFirstGroup(0, 0x1fff), v6WithFirstGroup(0x4000, 0xffff)), (text) => {
        const parsed = address(text)
        // IPv4-mapped and NAT64 forms of public IPv4 addresses are judged by what they embed.
        if (parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) return
        if ((parsed as ipaddr.IPv6).match(ipaddr.parseCIDR("64:ff9b::/96"))) return
        assert.isFalse(classify(parsed).public, text)
      }),
      { numRuns: 500 }
    )
  })

  it("every address in an allowed CIDR is accepted, whatever its class", () => {
    const cidrs = ["127.0.0.0/8", "10.20.0.0/16", "169.254.169.254/32", "::1/128", "fd00::/8"]
    const { cidrs: allowed } = parseCidrs(cidrs)
    fc.assert(
      fc.property(
        fc.oneof(
          inV4Cidr("127.0.0.0/8"),
          inV4Cidr("10.20.0.0/16"),
          fc.constant("169.254.169.254"),
          fc.constant("::1"),
          v6WithFirstGroup(0xfd00, 0xfdff),
          inV4Cidr("127.0.0.0/8").map((text) => `::ffff:${text}`)
        ),
        (text) => {
          assert.isTrue(judge(address(text), allowed).public, text)
        }
      ),
      { numRuns: 500 }
    )
  })

  it("an allowed CIDR allows nothing outside it", () => {
    const { cidrs: allowed } = parseCidrs(["127.0.0.1/32"])
    fc.assert(
      fc.property(inV4Cidr("127.0.0.0/8").filter((text) => text !== "127.0.0.1"), (text) => {
        assert.isFalse(judge(address(text), allowed).public, text)
      }),
      { numRuns: 200 }
    )
  })
})

describe("SVC_ALLOWED_TARGET_CIDRS parsing", () => {
  it("accepts IPv4 and IPv6 CIDRs and bare addresses", () => {
    const { cidrs, invalid } = parseCidrs(["127.0.0.0/8", "::1/128", "10.1.2.3"])
    assert.deepStrictEqual(invalid, [])
    assert.strictEqual(cidrs.length, 3)
    assert.isTrue(inCidrs(address("10.1.2.3"), cidrs))
    assert.isFalse(inCidrs(address("10.1.2.4"), cidrs))
  })

  it("names every entry that is not a canonical CIDR", () => {
    const { invalid } = parseCidrs([
      "127.0.0.0/33",
      "0177.0.0.1/8",
      "localhost",
      "::1/129",
      "10.0.0.0/8/8",
      "10.0.0.0/x"
    ])
    assert.deepStrictEqual(invalid, [
      "127.0.0.0/33",
      "0177.0.0.1/8",
      "localhost",
      "::1/129",
      "10.0.0.0/8/8",
      "10.0.0.0/x"
    ])
  })

  it("does not take non-canonical IPv4 spellings as addresses (the URL parser normalises them first)", () => {
    assert.isUndefined(parseAddress("0x7f.1"))
    assert.isUndefined(parseAddress("2130706433"))
    assert.isUndefined(parseAddress("0177.0.0.1"))
    assert.isDefined(parseAddress("[::1]"))
  })
})
