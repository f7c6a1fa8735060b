/**
 * Opaque keyset cursors for newest-first lists. A cursor holds the `seq` of
 * the last item of a page; the next page starts strictly below it, so items
 * added meanwhile (which get higher `seq`) never shift, skip or repeat items
 * of later pages.
 */
import { Option } from "effect"

export const encodeCursor = (seq: string | number | bigint): string =>
  Buffer.from(JSON.stringify({ s: String(seq) }), "utf8").toString("base64url")

/** `None` for a cursor we did not issue. */
export const decodeCursor = (cursor: string): Option.Option<string> => {
  try {
    const parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as { s?: unknown }
    return typeof parsed.s === "string" && /^\d{1,19}$/.test(parsed.s) ? Option.some(parsed.s) : Option.none()
  } catch {
    return Option.none()
  }
}

/** The page and the cursor of the next one, from `limit + 1` fetched rows. */
export const page = <Row extends { readonly seq: string | number | bigint }>(rows: ReadonlyArray<Row>, limit: number) => {
  const items = rows.slice(0, limit)
  const last = items[items.length - 1]
  return {
    items,
    next_cursor: rows.length > limit && last !== undefined ? encodeCursor(last.seq) : null
  }
}
