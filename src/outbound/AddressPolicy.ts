/**
 * Which IP addresses an outbound request of `svc` may go to.
 *
 * An address is public when it is ordinary global unicast: for IPv4 every
 * address outside the IANA special-purpose ranges, for IPv6 an address in
 * 2000::/3 (the only block IANA allocates as global unicast) outside the
 * special-purpose ranges. Everything else (loopback, private, link-local,
 * carrier-grade NAT, multicast, reserved, "this network", documentation,
 * benchmarking, unique-local, site-local, discard-only, Teredo, ORCHID, the
 * IPv4-compatible and IPv4-translated forms, local-use NAT64, ...) is not.
 * Addresses that embed an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`, NAT64
 * `64:ff9b::a.b.c.d`, 6to4 `2002:AABB:CCDD::`) are as public as the address
 * they embed.
 *
 * `ipaddr.js` parses addresses and CIDRs and names the special ranges (its
 * tables follow the IANA registries). What is written here by hand is the
 * decision on top of it, because the library only names ranges: it calls
 * any IPv6 address outside its table (e.g. `4000::1`, not allocated)
 * "unicast", and it cannot know that a 6to4 or NAT64 address must be judged
 * by the IPv4 address inside it. So we accept by allow-list (named "unicast"
 * AND inside 2000::/3 for IPv6) rather than refuse by deny-list, and unwrap
 * the embedding forms ourselves.
 */
import ipaddr from "ipaddr.js"
import { isIP } from "node:net"

export type Address = ipaddr.IPv4 | ipaddr.IPv6

/** The verdict on one address: public, or the name of the non-public class it belongs to. */
export type AddressClass =
  | { readonly public: true }
  | { readonly public: false; readonly range: string }

const PUBLIC: AddressClass = { public: true }
const refused = (range: string): AddressClass => ({ public: false, range })

// IPv4 ranges that ipaddr.js names but that are globally reachable unicast
// (IANA "Globally Reachable: True"): AS112 DNS sinks and AMT relays.
const publicV4Ranges = new Set<string>(["unicast", "as112", "amt"])
const publicV6Ranges = new Set<string>(["unicast", "as112v6", "amt"])

const globalUnicastV6 = ipaddr.parseCIDR("2000::/3") as [ipaddr.IPv6, number]
// The NAT64 well-known prefix (RFC 6052) embeds the IPv4 address in its last
// 32 bits; the local-use prefix 64:ff9b:1::/48 (RFC 8215) is translated by a
// local gateway to whatever it is configured for, so it is never public.
const nat64WellKnown = ipaddr.parseCIDR("64:ff9b::/96") as [ipaddr.IPv6, number]
// IPv4-compatible addresses (`::a.b.c.d`, RFC 4291, deprecated) and the
// unspecified/loopback addresses inside the same /96.
const ipv4Compatible = ipaddr.parseCIDR("::/96") as [ipaddr.IPv6, number]

const v4FromParts = (high: number, low: number): ipaddr.IPv4 =>
  new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff])

const classifyV4 = (address: ipaddr.IPv4): AddressClass => {
  const range = address.range()
  return publicV4Ranges.has(range) ? PUBLIC : refused(range)
}

const embedded = (form: string, inner: ipaddr.IPv4): AddressClass => {
  const verdict = classifyV4(inner)
  return verdict.public ? PUBLIC : refused(`${form} (${verdict.range})`)
}

const classifyV6 = (address: ipaddr.IPv6): AddressClass => {
  if (address.isIPv4MappedAddress()) return embedded("ipv4Mapped", address.toIPv4Address())
  if (address.match(nat64WellKnown)) return embedded("nat64", v4FromParts(address.parts[6], address.parts[7]))
  const range = address.range()
  if (range === "6to4") return embedded("6to4", v4FromParts(address.parts[1], address.parts[2]))
  if (range === "unspecified" || range === "loopback") return refused(range)
  if (address.match(ipv4Compatible)) return refused("ipv4Compatible")
  if (!address.match(globalUnicastV6)) return refused(range === "unicast" ? "notGlobalUnicast" : range)
  return publicV6Ranges.has(range) ? PUBLIC : refused(range)
}

/** The class of one address (no allow-list applied). */
export const classify = (address: Address): AddressClass =>
  address.kind() === "ipv4" ? classifyV4(address as ipaddr.IPv4) : classifyV6(address as ipaddr.IPv6)

/**
 * Parses an address in its canonical text form only (dotted quad, or IPv6
 * as `node:net` accepts it). ipaddr.js alone would also take `0x7f.1` or
 * `2130706433`; such forms must have been normalised by the URL parser
 * before they get here, so anything else is not an address.
 */
export const parseAddress = (text: string): Address | undefined => {
  const bare = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text
  if (isIP(bare) === 0) return undefined
  return ipaddr.parse(bare)
}

/** An IPv4-mapped IPv6 address is the IPv4 address it maps; anything else is itself. */
export const unmap = (address: Address): Address =>
  address.kind() === "ipv6" && (address as ipaddr.IPv6).isIPv4MappedAddress()
    ? (address as ipaddr.IPv6).toIPv4Address()
    : address

export type Cidr = readonly [Address, number]

/**
 * Parses `SVC_ALLOWED_TARGET_CIDRS` entries (`127.0.0.0/8`, `::1/128`; a bare
 * address means that address alone). Answers the entries that are not valid
 * CIDRs in `invalid`, so configuration can refuse to start with a clear
 * message instead of silently allowing less (or more) than intended.
 */
export const parseCidrs = (entries: ReadonlyArray<string>) => {
  const cidrs: Array<Cidr> = []
  const invalid: Array<string> = []
  for (const entry of entries) {
    const [addressText, bitsText, ...rest] = entry.trim().split("/")
    const address = addressText === undefined ? undefined : parseAddress(addressText)
    const max = address?.kind() === "ipv4" ? 32 : 128
    const bits = bitsText === undefined ? max : /^\d{1,3}$/.test(bitsText) ? Number(bitsText) : Number.NaN
    if (address === undefined || rest.length > 0 || !(bits >= 0 && bits <= max)) {
      invalid.push(entry)
    } else {
      cidrs.push([address, bits])
    }
  }
  return { cidrs, invalid }
}

/** Whether `address` (or the IPv4 address it maps) lies in one of `cidrs`. */
export const inCidrs = (address: Address, cidrs: ReadonlyArray<Cidr>): boolean => {
  const candidates = [address, unmap(address)]
  return cidrs.some(([network, bits]) =>
    candidates.some((candidate) => candidate.kind() === network.kind() && candidate.match(network, bits))
  )
}

/** The verdict with the allow-list applied: an allowed address is accepted whatever its class. */
export const judge = (address: Address, allowed: ReadonlyArray<Cidr>): AddressClass =>
  inCidrs(address, allowed) ? PUBLIC : classify(address)
