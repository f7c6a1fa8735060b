/**
 * Searching a target's or an organization's deliveries: filters over the
 * `delivery_records` view, newest first by `(created_at, seq)`, one page at
 * a time past a position. Every filter is evaluated on what the API
 * answers (the view's status, status code, finish), so a page holds exactly
 * the matching records; the indexes of migration 0930 only decide how few
 * rows are read to fill it:
 *
 * - the list's order is an index (`deliveries_org_created_idx` per
 *   organization and kind, `deliveries_target_created_idx` per target), so
 *   a page of common matches (delivered, 2xx, an event type) reads about
 *   its own rows;
 * - failed, retrying and partial deliveries, and HTTP statuses other than
 *   2xx (only rows written on their own carry one), are read from the
 *   partial indexes over rows neither logged nor delivered;
 * - queued and sending: those rows, and the logged rows past their target's
 *   cursor (the only logged rows not yet delivered), a bounded backlog;
 * - an event id or an approval id reads its few rows by index.
 *
 * What no index orders (an event type, an action class, a label, a finish
 * time) narrows what those read. A scan reads at most `scan` rows
 * (`SVC_DELIVERY_SEARCH_SCAN`): when few of them match, the page answers
 * shorter, even empty, with a cursor below the last row read, so a rare
 * match costs pages, never one unbounded statement.
 */
import type { PgClient } from "@effect/sql-pg"
import { Data, Effect, Option, Schema } from "effect"
import type { Statement } from "effect/sql"
import {
  type CursorMac,
  type CursorScope,
  decodeCursor,
  DEFAULT_PAGE_LIMIT,
  encodeCursor,
  isSeq,
  type PageRequest
} from "../../platform/Cursor.ts"
import { BigIntText } from "../../platform/Rows.ts"
import { inUtc } from "../../platform/Time.ts"
import * as Rows from "../Rows.ts"
import { COLUMNS, type Delivery, type DeliveryKind, type DeliveryStatus, toDelivery } from "../Types.ts"

/** Where a page starts: strictly below this `(created_at, seq)`, `created_at` in microseconds since 1970. */
export interface Position {
  readonly createdMicros: string
  readonly seq: string
}

/** The HTTP status of a delivery's last attempt: a class (`5` for 5xx) or one code. */
export type StatusCodeFilter = { readonly _tag: "Class"; readonly digit: number } | {
  readonly _tag: "Code"
  readonly code: number
}

export interface SearchInput {
  readonly orgId: string
  readonly kind: DeliveryKind
  /** One target's deliveries; absent: the organization's of `kind`. */
  readonly targetId?: string | undefined
  /** Statuses as the records read; several: any of them. */
  readonly statuses?: ReadonlyArray<DeliveryStatus> | undefined
  readonly statusCode?: StatusCodeFilter | undefined
  /** The event type its label names (a test delivery's too). */
  readonly eventType?: string | undefined
  readonly eventId?: string | undefined
  readonly approvalId?: string | undefined
  /** The action class of the approval's step: exact, or a prefix ending in `.*`. */
  readonly actionClass?: string | undefined
  /** The label: exact, or a prefix ending in `*`. */
  readonly label?: string | undefined
  /** Instants as RFC 3339 text: `from` inclusive, `until` exclusive. */
  readonly createdFrom?: string | undefined
  readonly createdUntil?: string | undefined
  readonly finishedFrom?: string | undefined
  readonly finishedUntil?: string | undefined
  readonly after?: Position | undefined
  readonly limit: number
  /** Most rows one scan reads before the page answers (`SVC_DELIVERY_SEARCH_SCAN`). */
  readonly scan: number
}

export interface Found {
  readonly delivery: Delivery
  readonly statusCode: number | null
  readonly position: Position
}

const SearchRow = Schema.Struct({
  ...Rows.DeliveryRow.fields,
  status_code: Schema.NullOr(Schema.Number),
  created_us: BigIntText
})
const decode = Rows.decodeRows("delivery_records", SearchRow)

/** Stored statuses that are their own record (never `logged`): read from the partial indexes. */
const ON_THEIR_OWN: ReadonlyArray<DeliveryStatus> = ["queued", "sending", "retrying", "failed", "partial"]

const quoted = (values: ReadonlyArray<string>) => values.map((value) => `'${value}'`).join(", ")

/**
 * A search's conditions: `walk` bounds the ordered index scan, `filter`
 * the rows it reads: on the row itself (`r`: its label, read before
 * anything else) or on its record (`v`, `delivery_records`: status, status
 * code, finish), read only for the rows that pass the former.
 */
interface Conditions {
  readonly walk: Array<Statement.Fragment>
  readonly filter: Array<Statement.Fragment>
}

/**
 * The conditions every branch shares: everything but the status, which
 * decides the branches. Statuses and status codes come from closed sets
 * and are written as literals, so the planner can match them to the
 * partial indexes' predicates.
 */
const common = (sql: PgClient.PgClient, input: SearchInput): Conditions => {
  // A target's rows are all of its organization and kind: the walk names the target alone, so that the
  // planner reads the target's own ordered indexes instead of intersecting the organization's with the
  // target's (a lossy bitmap of 200 000 rows: 500 ms for a page of an endpoint's failed deliveries); the
  // organization and kind are still checked on every row read.
  const walk: Array<Statement.Fragment> = input.targetId === undefined
    ? [sql`r.org_id = ${input.orgId}`, sql`r.kind = ${input.kind}`]
    : [sql`r.target_id = ${input.targetId}`]
  const filter: Array<Statement.Fragment> = input.targetId === undefined
    ? []
    : [sql`v.org_id = ${input.orgId}`, sql`v.kind = ${input.kind}`]
  const code = input.statusCode
  if (code !== undefined) {
    const [low, high] = code._tag === "Class" ? [code.digit * 100, code.digit * 100 + 99] : [code.code, code.code]
    filter.push(sql`v.status_code BETWEEN ${sql.literal(String(low))} AND ${sql.literal(String(high))}`)
    // Only a row written on its own carries a status other than 2xx: its last attempt failed.
    if (low >= 300 || high < 200) walk.push(sql`r.stored_status NOT IN ('logged', 'delivered')`)
  }
  if (input.eventId !== undefined) walk.push(sql`r.event_id = ${input.eventId}`)
  if (input.approvalId !== undefined) {
    walk.push(sql`r.label LIKE 'approval.%'`, sql`split_part(r.label, ' ', 2) = ${input.approvalId}`)
  }
  if (input.eventType !== undefined) {
    filter.push(
      sql`(starts_with(r.label, ${input.eventType + " "}) OR r.label IN (${input.eventType}, ${
        "test " + input.eventType
      }))`
    )
  }
  if (input.label !== undefined) {
    filter.push(
      input.label.endsWith("*") ? sql`starts_with(r.label, ${input.label.slice(0, -1)})` : sql`r.label = ${input.label}`
    )
  }
  if (input.actionClass !== undefined) {
    // A scalar subquery, looked up by key for each row the walk reads, in its order, until the page is full
    // (about 20 ms for a common class among 10 million records); as EXISTS, the planner joined it by hash with
    // every step of the class first (780 ms for 100 000 of them).
    const cls = sql`(SELECT s.action_class FROM approvals a
      JOIN agent_steps s ON s.session_id = a.session_id AND s.step_id = a.step_id
      WHERE a.id = CASE WHEN r.label LIKE 'approval.%' THEN split_part(r.label, ' ', 2)::uuid END)`
    filter.push(
      input.actionClass.endsWith(".*")
        ? sql`starts_with(${cls}, ${input.actionClass.slice(0, -1)})`
        : sql`${cls} = ${input.actionClass}`
    )
  }
  if (input.createdFrom !== undefined) walk.push(sql`r.created_at >= ${inUtc(input.createdFrom)}::timestamptz`)
  if (input.createdUntil !== undefined) walk.push(sql`r.created_at < ${inUtc(input.createdUntil)}::timestamptz`)
  if (input.finishedFrom !== undefined) filter.push(sql`v.finished_at >= ${inUtc(input.finishedFrom)}::timestamptz`)
  if (input.finishedUntil !== undefined) {
    // A delivery is created before it finishes: the bound also limits the walk.
    filter.push(sql`v.finished_at < ${inUtc(input.finishedUntil)}::timestamptz`)
    walk.push(sql`r.created_at < ${inUtc(input.finishedUntil)}::timestamptz`)
  }
  if (input.after !== undefined) {
    walk.push(sql`(r.created_at, r.seq) < (
      'epoch'::timestamptz + ${input.after.createdMicros}::bigint * interval '1 microsecond', ${input.after.seq}::bigint)`)
  }
  return { walk, filter }
}

/** One ordered scan: its own conditions. */
type Branch = Conditions

/**
 * The branches a status filter reads, each one ordered scan: a status a
 * row holds on its own from the partial indexes; `delivered` from the
 * list's order (stored delivered or logged); `queued` and `sending` also
 * from the logged rows past their target's cursor. No status: one branch.
 */
const branches = (sql: PgClient.PgClient, input: SearchInput): Array<Branch> => {
  const statuses = input.statuses
  if (statuses === undefined || statuses.length === 0) return [{ walk: [], filter: [] }]
  const status = sql`v.status IN (${sql.literal(quoted(statuses))})`
  const own = statuses.filter((s) => ON_THEIR_OWN.includes(s))
  const out: Array<Branch> = []
  if (own.length > 0) out.push({ walk: [sql`r.stored_status IN (${sql.literal(quoted(own))})`], filter: [status] })
  if (statuses.includes("delivered")) {
    out.push({ walk: [sql`r.stored_status IN ('delivered', 'logged')`], filter: [status] })
  } else if (statuses.includes("queued") || statuses.includes("sending")) {
    // Logged rows past their target's cursor, the only ones not delivered: the newest, so an ordered walk meets them first.
    out.push({
      walk: [
        sql`r.stored_status = 'logged'`,
        // One target's cursor is read once, a bound of the walk on `(target_id, seq)`: the backlog alone is read,
        // not the target's history below it (650 ms for a backlog of 2 000 rows over 200 000).
        input.targetId === undefined
          ? sql`r.seq > coalesce((SELECT t.cursor FROM delivery_targets t WHERE t.id = r.target_id), 0)`
          : sql`r.seq > coalesce((SELECT t.cursor FROM delivery_targets t WHERE t.id = ${input.targetId}), 0)`
      ],
      filter: [status]
    })
  }
  return out
}

const NEWEST_FIRST = "ORDER BY r.created_at DESC, r.seq DESC"
const RECORD_COLUMNS = COLUMNS.split(",").map((column) => `v.${column.trim()}`).join(", ")
const POSITION = "(extract(epoch FROM r.created_at) * 1000000)::bigint AS created_us"

const positionOf = (row: { readonly created_us: string; readonly seq: string }): Position => ({
  createdMicros: row.created_us,
  seq: row.seq
})

/** Whether position `a` is at or above (newer than or equal to) `b`. */
const atOrAbove = (a: Position, b: Position) => {
  const [ac, bc] = [BigInt(a.createdMicros), BigInt(b.createdMicros)]
  return ac > bc || (ac === bc && BigInt(a.seq) >= BigInt(b.seq))
}

const newestFirst = (a: Found, b: Found) => (atOrAbove(a.position, b.position) ? -1 : 1)

/**
 * The statements of a search, one per ordered scan: `page`, its matching
 * rows (at most `limit`); `lastRead`, the position of the scan's last row
 * when it reads its whole budget (no row otherwise).
 * `bench/scenarios/delivery-search.ts` explains them.
 */
export const statements = (sql: PgClient.PgClient, input: SearchInput) => {
  const shared = common(sql, input)
  return branches(sql, input).map((branch) => {
    const walk = sql.and([...shared.walk, ...branch.walk])
    const filter = sql.and([...shared.filter, ...branch.filter])
    const walked = sql`
      SELECT r.id, r.seq, r.created_at, r.label FROM (SELECT d.*, d.status AS stored_status FROM deliveries d) r
      WHERE ${walk} ${sql.literal(NEWEST_FIRST)}`
    // An event's or an approval's few rows are read by their index, then sorted: planned on its own (a
    // materialized CTE), the scan is not chosen for the page's LIMIT, which, on an estimate of many matches,
    // made the planner walk the organization's whole history in order (6.3 s on 4 million rows).
    const lookup = input.eventId !== undefined || input.approvalId !== undefined
    const select = sql`
      SELECT ${sql.literal(RECORD_COLUMNS)}, v.status_code, ${sql.literal(POSITION)}
      FROM ${lookup ? sql`walked r` : sql`(${walked} LIMIT ${input.scan}) r`}
      JOIN delivery_records v ON v.id = r.id
      WHERE ${filter} ${sql.literal(NEWEST_FIRST)} LIMIT ${input.limit}`
    return {
      page: lookup ? sql`WITH walked AS MATERIALIZED (${walked} LIMIT ${input.scan}) ${select}` : select,
      lastRead: sql`SELECT r.seq, ${sql.literal(POSITION)} FROM (${walked}) r OFFSET ${input.scan - 1} LIMIT 1`
    }
  })
}

/**
 * One page of the search: at most `limit` matching rows, newest first,
 * each with its position; and `scannedTo`, set when a scan read its whole
 * budget (`scan` rows) before the page filled: the position of the last
 * row read. Rows below it were not looked at, so the page holds only the
 * matches above it (possibly none) and the next page starts there.
 */
const search = Effect.fnUntraced(function*(sql: PgClient.PgClient, input: SearchInput) {
  const found: Array<Found> = []
  let scannedTo: Position | undefined
  for (const statement of statements(sql, input)) {
    const rows = yield* decode(statement.page).pipe(Effect.orDie)
    found.push(
      ...rows.map((row): Found => ({
        delivery: toDelivery(row),
        statusCode: row.status_code,
        position: positionOf(row)
      }))
    )
    if (rows.length >= input.limit) continue
    // The page did not fill from this scan: did it stop at its budget? Where?
    const [last] = yield* positions(statement.lastRead).pipe(Effect.orDie)
    if (last !== undefined && (scannedTo === undefined || atOrAbove(positionOf(last), scannedTo))) {
      scannedTo = positionOf(last)
    }
  }
  const bound = scannedTo
  const rows = found.filter((row) => bound === undefined || atOrAbove(row.position, bound)).sort(newestFirst)
  return { rows: rows.slice(0, input.limit), scannedTo: rows.length >= input.limit ? undefined : bound }
})

const positions = Rows.decodeRows("deliveries", Schema.Struct({ seq: BigIntText, created_us: BigIntText }))

/** A cursor this list (organization, filters) did not issue: the API answers 400 naming `cursor`. */
export class UnknownCursor extends Data.TaggedError("UnknownCursor")<{}> {}

/** A position as a cursor carries it: `<created_at in µs>.<seq>`, each a non-negative `bigint`. */
const isPosition = (value: string) => {
  const parts = value.split(".")
  return parts.length === 2 && parts.every(isSeq)
}

/**
 * One page of a search as a list answers it: the position its cursor names
 * (`UnknownCursor` for one this list, organization and filters did not
 * issue), `limit + 1` rows past it, and the cursor of the next page.
 */
export const searchPage = Effect.fnUntraced(function*(
  sql: PgClient.PgClient,
  mac: CursorMac,
  scope: CursorScope,
  input: Omit<SearchInput, "after" | "limit">,
  request: PageRequest
) {
  const limit = request.limit ?? DEFAULT_PAGE_LIMIT
  let after: Position | undefined
  if (request.cursor !== undefined) {
    const decoded = decodeCursor(mac, scope, request.cursor, isPosition)
    if (Option.isNone(decoded)) {
      return yield* new UnknownCursor()
    }
    const [createdMicros, seq] = decoded.value.split(".") as [string, string]
    after = { createdMicros, seq }
  }
  // Without JIT: a search's estimates over a long history pass PostgreSQL's JIT thresholds, and compiling
  // cost 0.7 s and more of a statement that then ran in under a millisecond (10 million records).
  const { rows, scannedTo } = yield* sql.withTransaction(
    Effect.andThen(sql`SET LOCAL jit = off`, search(sql, { ...input, after, limit: limit + 1 }))
  ).pipe(Effect.orDie)
  const items = rows.slice(0, limit)
  const next = rows.length > limit ? items.at(-1)?.position : scannedTo
  return {
    items,
    next_cursor: next === undefined ? null : encodeCursor(mac, scope, `${next.createdMicros}.${next.seq}`)
  }
})
