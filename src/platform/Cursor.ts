/**
 * Opaque keyset cursors for newest-first lists. A cursor holds the `seq` of
 * the last item of a page; the next page starts strictly below it, so items
 * added meanwhile (which get higher `seq`) never shift, skip or repeat items
 * of later pages.
 *
 * A cursor is bound to the list that issued it: the organization, the list
 * (e.g. `runs`) and its filters are covered by a MAC under a key derived from
 * the master key (`SecretBox.mac`). A cursor of another organization or
 * list, an edited one, or one whose `seq` is not a PostgreSQL `bigint`, is
 * refused (400 naming `cursor`), never used in a query.
 */
import { Effect, Option } from "effect"
import crypto from "node:crypto"
import { InvalidRequest } from "../api/Errors.ts"

/** Computes the MAC of a cursor (`SecretBox.mac` with purpose `cursor`). */
export type CursorMac = (message: string) => string

/** Which list a cursor belongs to: its organization, its name and its filters. */
export interface CursorScope {
  readonly orgId: string
  readonly list: string
  readonly filters?: ReadonlyArray<string | undefined>
}

/** Largest PostgreSQL `bigint`. */
const MAX_SEQ = 2n ** 63n - 1n
/** Bytes of MAC kept in a cursor (128 bits). */
const TAG_CHARS = 22

const SEQ = /^(?:0|[1-9]\d{0,18})$/
const BASE64URL = /^[A-Za-z0-9_-]+$/

const message = (scope: CursorScope, seq: string) =>
  JSON.stringify(["cursor/v1", scope.orgId, scope.list, scope.filters ?? [], seq])

/** Whether `seq` is a decimal `bigint` a sequence may hold (0 to 2^63 - 1). */
export const isSeq = (seq: string): boolean => SEQ.test(seq) && BigInt(seq) <= MAX_SEQ

export const encodeCursor = (mac: CursorMac, scope: CursorScope, seq: string | number | bigint): string => {
  const value = String(seq)
  return `${Buffer.from(value, "utf8").toString("base64url")}.${mac(message(scope, value)).slice(0, TAG_CHARS)}`
}

/**
 * The `seq` of a cursor this list issued; `None` for anything else. A list
 * whose position is not one `seq` (several keys) says what it accepts with
 * `valid`.
 */
export const decodeCursor = (
  mac: CursorMac,
  scope: CursorScope,
  cursor: string,
  valid: (value: string) => boolean = isSeq
): Option.Option<string> => {
  const parts = cursor.split(".")
  if (parts.length !== 2) return Option.none()
  const [encoded, tag] = parts as [string, string]
  if (!BASE64URL.test(encoded) || tag.length !== TAG_CHARS || !BASE64URL.test(tag)) return Option.none()
  const seq = Buffer.from(encoded, "base64url").toString("utf8")
  // Canonical encodings only: one cursor per sequence number.
  if (Buffer.from(seq, "utf8").toString("base64url") !== encoded || !valid(seq)) return Option.none()
  const expected = Buffer.from(mac(message(scope, seq)).slice(0, TAG_CHARS), "utf8")
  const given = Buffer.from(tag, "utf8")
  return expected.length === given.length && crypto.timingSafeEqual(expected, given) ? Option.some(seq) : Option.none()
}

/**
 * The `seq` bound of a page request; a cursor this list did not issue (another
 * organization's or list's, edited, out of range) is a 400 naming `cursor`.
 */
export const seqBound = (mac: CursorMac, scope: CursorScope, cursor: string | undefined) => {
  if (cursor === undefined) return Effect.succeed(Option.none<string>())
  return Option.match(decodeCursor(mac, scope, cursor), {
    onNone: () => Effect.fail(new InvalidRequest({ field: "cursor", detail: "cursor is not one this list issued" })),
    onSome: (seq) => Effect.succeed(Option.some(seq))
  })
}

/** The page and the cursor of the next one, from `limit + 1` fetched rows. */
export const page = <Row extends { readonly seq: string | number | bigint }>(
  rows: ReadonlyArray<Row>,
  limit: number,
  next: (seq: string | number | bigint) => string
) => {
  const items = rows.slice(0, limit)
  const last = items[items.length - 1]
  return {
    items,
    next_cursor: rows.length > limit && last !== undefined ? next(last.seq) : null
  }
}

/** The answer to a cursor a list did not issue. */
export const cursorRefused = () =>
  new InvalidRequest({ field: "cursor", detail: "cursor is not one this list issued with these filters" })

/** A page request of a keyset list. */
export interface PageRequest {
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
}

/** Items per page when a request does not say. */
export const DEFAULT_PAGE_LIMIT = 50

/**
 * One page of a keyset list: the bound its cursor names (a 400 for a
 * cursor this list did not issue), `limit + 1` rows fetched past it by
 * `fetch`, then the page and the cursor of the next one.
 */
export const keysetPage = <Row extends { readonly seq: string | number | bigint }, E, R>(
  mac: CursorMac,
  scope: CursorScope,
  request: PageRequest,
  fetch: (bound: Option.Option<string>, rows: number) => Effect.Effect<ReadonlyArray<Row>, E, R>
): Effect.Effect<
  { readonly items: ReadonlyArray<Row>; readonly next_cursor: string | null },
  E | InvalidRequest,
  R
> => {
  const limit = request.limit ?? DEFAULT_PAGE_LIMIT
  return Effect.flatMap(
    seqBound(mac, scope, request.cursor),
    (bound) => Effect.map(fetch(bound, limit + 1), (rows) => page(rows, limit, (seq) => encodeCursor(mac, scope, seq)))
  )
}
