/**
 * The static half of the outbound URL checks: what can be decided from the
 * URL text alone, before any DNS resolution.
 *
 * The URL goes through the WHATWG URL parser (the one browsers use, built
 * into Node), which lower-cases the host, maps IDN names to punycode
 * (so `ｌｏｃａｌｈｏｓｔ` is `localhost`) and rewrites every IPv4 spelling
 * (`2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`) to a dotted quad. Every
 * later check looks at that normalised host only, so an encoding trick
 * cannot get past one check and reach a different address.
 *
 * Messages never contain the URL, its credentials or its path: they are
 * shown to API callers and may be logged.
 */
import { type Address, parseAddress } from "./AddressPolicy.ts"

/** The longest URL we accept (the common limit of browsers and proxies). */
export const MAX_URL_LENGTH = 2048

export type TargetHost =
  | { readonly _tag: "Ip"; readonly address: Address }
  | { readonly _tag: "Name"; readonly name: string }

export interface Target {
  /** The parsed URL (normalised; fragment removed). */
  readonly url: URL
  readonly host: TargetHost
  readonly port: number
  /** `https://host[:port]/…/abcd`: safe to show and log. */
  readonly hint: string
}

export type Parsed =
  | { readonly _tag: "Ok"; readonly target: Target }
  | { readonly _tag: "Refused"; readonly message: string }

/**
 * Host names refused whatever they resolve to: the loopback names of
 * RFC 6761 and common hosts files, and the names under which cloud
 * providers serve instance metadata (credentials!) to whatever asks. Their
 * addresses are non-public anyway; refusing the names too means a resolver
 * that answers something unexpected for them, or an allow-list that covers
 * their addresses, still cannot send us there.
 */
const blockedNames: ReadonlySet<string> = new Set([
  "localhost",
  "localhost.localdomain",
  "ip6-localhost",
  "ip6-loopback",
  "metadata",
  "metadata.google.internal",
  "metadata.goog",
  "metadata.azure.internal",
  "instance-data",
  "instance-data.ec2.internal",
  "metadata.platformequinix.com",
  "metadata.packet.net",
  "kubernetes.default",
  "kubernetes.default.svc"
])

/** Suffixes refused whatever precedes them (RFC 6761: `.localhost` always means loopback). */
const blockedSuffixes: ReadonlyArray<string> = [".localhost"]

/** Whether a (normalised, lower-case) host name is refused by name. */
const isBlockedName = (name: string): boolean => {
  // `localhost.` is `localhost`: a trailing dot only marks the name as absolute.
  const bare = name.replace(/\.+$/, "")
  return blockedNames.has(bare) || blockedSuffixes.some((suffix) => bare.endsWith(suffix))
}

const refuse = (message: string): Parsed => ({ _tag: "Refused", message })

/**
 * `https://hooks.example.com/…`: scheme, host and port when not 443; `/…`
 * stands for any path or query, and nothing of them is shown (chat and
 * automation hooks carry their token there, so even a few characters of it
 * would be too many).
 */
export const urlHint = (url: URL): string => {
  const origin = `${url.protocol}//${url.host}`
  return (url.pathname === "" || url.pathname === "/") && url.search === "" ? `${origin}/` : `${origin}/…`
}

/** Parses and checks everything about `raw` that needs no DNS. */
export const parseTarget = (raw: string): Parsed => {
  if (raw.length > MAX_URL_LENGTH) return refuse(`the URL is longer than ${MAX_URL_LENGTH} characters`)
  const url = URL.parse(raw)
  if (url === null) return refuse("not a valid absolute URL")
  if (url.protocol !== "https:") return refuse("the URL must use https")
  if (url.username !== "" || url.password !== "") return refuse("the URL must not contain credentials")
  return hostTarget(url, 443)
}

/** The host checks of every outbound URL (`https`, and broker URLs: `src/brokers/BrokerUrl.ts`), on a parsed URL whose scheme was checked. */
export const hostTarget = (url: URL, defaultPort: number): Parsed => {
  url.hash = ""
  const hostname = url.hostname
  if (hostname === "") return refuse("the URL has no host")
  const port = url.port === "" ? defaultPort : Number(url.port)
  if (port === 0) return refuse("the URL's port must not be 0")
  const address = parseAddress(hostname)
  const hint = urlHint(url)
  if (address !== undefined) {
    return { _tag: "Ok", target: { url, host: { _tag: "Ip", address }, port, hint } }
  }
  if (isBlockedName(hostname)) return refuse("the host is a local or metadata name")
  return { _tag: "Ok", target: { url, host: { _tag: "Name", name: hostname }, port, hint } }
}
