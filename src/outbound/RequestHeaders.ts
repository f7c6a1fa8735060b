/**
 * The headers as sent: the caller's, lower-cased (of two names that differ
 * only in case, the later wins), our `user-agent` unless the caller gave
 * one, and always `accept-encoding: identity`. As undici's flat
 * `[name, value, ...]` list, which it reads without listing an object's
 * keys. A webhook's headers (names already lower-case, neither of ours
 * among them) go straight into the list without a `Map` (0.6 % → 0.14 % of
 * svc's busy CPU in the drain, `bench/notes/webhook-sender.md`); any other
 * case takes the map.
 */
import { VERSION } from "../api/Version.ts"

const USER_AGENT = `svc/${VERSION}`

export const requestHeaders = (headers: Readonly<Record<string, string>>): Array<string> => {
  // The names of an object are distinct: when all are lower-case and none is
  // ours, nothing needs folding or replacing.
  const out: Array<string> = ["user-agent", USER_AGENT]
  for (const name in headers) {
    if (name !== name.toLowerCase() || name === "user-agent" || name === "accept-encoding") return mergedHeaders(headers)
    out.push(name, headers[name]!)
  }
  // We never decompress, so a compressed answer can never expand beyond what
  // we read; asking for identity keeps the kept snippet readable.
  out.push("accept-encoding", "identity")
  return out
}

/** `requestHeaders` when names need folding or replace ours. */
const mergedHeaders = (headers: Readonly<Record<string, string>>): Array<string> => {
  const byName = new Map<string, string>([["user-agent", USER_AGENT]])
  for (const name in headers) byName.set(name.toLowerCase(), headers[name]!)
  byName.set("accept-encoding", "identity")
  const out: Array<string> = []
  for (const [name, value] of byName) out.push(name, value)
  return out
}
