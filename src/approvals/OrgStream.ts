/**
 * The organization's approvals as the console sees them: the list (with the
 * governed step's tool, action class and arguments) and the stream of every
 * approval change (issue 11, item 8).
 *
 * Each approval transaction appends its changes to `approval_stream_events`
 * as its LAST step, after every other row it locks (approval, step,
 * session): bumping the organization's counter locks it until commit, so an
 * organization's events commit in id order (a reader resuming after id N
 * misses nothing and sees nothing twice) and the fixed lock order cannot
 * deadlock. After commit, `SessionHub.notify(approvalsTopic(orgId))` wakes
 * the streams, here and (NOTIFY) in other processes.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema, Stream } from "effect"
import type { SqlClient } from "effect/sql"
import type { ApprovalEventType, ApprovalListItem, ApprovalStatus } from "../api/Approvals.ts"
import { InvalidRequest } from "../api/Errors.ts"
import { hubFrames, SessionHub, STREAM_BATCH, storedEvents } from "../streams/SessionEvents.ts"
import { Metrics } from "../observability/Metrics.ts"
import { SvcConfig } from "../platform/Config.ts"
import { SecretBox } from "../platform/Crypto.ts"
import { type CursorMac, type CursorScope, encodeCursor, seqBound } from "../platform/Cursor.ts"
import { BigIntText, JsonColumn, rowsOf, Timestamp } from "../platform/Rows.ts"
import { ApprovalColumns, snapshotOf } from "./Events.ts"

/** The `SessionHub` key that the organization's approval streams watch. */
export const approvalsTopic = (orgId: string) => `approvals:${orgId}`

/** One change to append: its event type and the approval it concerns. */
export interface StreamEntry {
  readonly type: ApprovalEventType
  readonly approvalId: string
}

/** An approval with its step (`LIST_COLUMNS` of `LIST_FROM`). */
const ListColumns = Schema.Struct({
  ...ApprovalColumns.fields,
  seq: BigIntText,
  escalation_seconds: Schema.NullOr(Schema.Number),
  escalated: Schema.Boolean,
  created_at: Timestamp,
  tool: Schema.NullOr(Schema.String),
  action_class: Schema.NullOr(Schema.String),
  arguments: Schema.NullOr(JsonColumn(Schema.Json))
})
export type ListRow = typeof ListColumns.Type
const ListRows = rowsOf("approvals", ListColumns)
const CounterRows = rowsOf("approval_stream_counters", Schema.Struct({ seq: Schema.String }))
const EventRows = storedEvents("approval_stream_events")

/** The columns of `approvals a` joined with its step `s`, for `ListRow`. */
export const LIST_COLUMNS =
  "a.seq::text AS seq, a.id, a.org_id, a.session_id, a.step_id, a.task_id, a.status, a.deadline_at, a.expires_at, a.timeout_action, a.decided_at, a.decided_by, a.escalation_seconds, a.escalated, a.created_at, s.tool, s.action_class, s.arguments"

export const LIST_FROM = "approvals a LEFT JOIN agent_steps s ON s.session_id = a.session_id AND s.step_id = a.step_id"

export const listItemOf = (row: ListRow): ApprovalListItem => ({
  ...snapshotOf(row),
  tool: row.tool ?? "",
  action_class: row.action_class ?? "",
  arguments: row.arguments,
  escalation: row.escalation_seconds === null ? "none" : row.escalated ? "escalated" : "pending",
  requested_at: row.created_at
})

/**
 * Appends `entries` to the organization's approval stream. Run it inside
 * the transaction that made the changes, as its last statement; each event
 * carries the approval as it stands when the transaction commits.
 */
export const appendApprovalStream = (sql: SqlClient.SqlClient, orgId: string, entries: ReadonlyArray<StreamEntry>) =>
  Effect.forEach(entries, (entry) =>
    Effect.gen(function*() {
      const row = yield* ListRows.one(sql`
        SELECT ${sql.literal(LIST_COLUMNS)} FROM ${sql.literal(LIST_FROM)} WHERE a.id = ${entry.approvalId}
      `)
      if (row === undefined) return
      const counter = yield* CounterRows.returned(sql`
        INSERT INTO approval_stream_counters (org_id, seq) VALUES (${orgId}, 1)
        ON CONFLICT (org_id) DO UPDATE SET seq = approval_stream_counters.seq + 1
        RETURNING seq::text AS seq
      `)
      yield* sql`
        INSERT INTO approval_stream_events (org_id, seq, name, data)
        VALUES (${orgId}, ${counter.seq}, ${entry.type}, ${JSON.stringify(listItemOf(row))})
      `
    }), { discard: true })

export class ApprovalFeed extends Context.Service<ApprovalFeed, {
  /** The organization's approvals, oldest request first, optionally of one status. */
  readonly list: (orgId: string, options: {
    readonly status?: ApprovalStatus | undefined
    readonly limit: number
    readonly cursor?: string | undefined
  }) => Effect.Effect<{ readonly approvals: ReadonlyArray<ApprovalListItem>; readonly next_cursor: string | null }, InvalidRequest>
  /** SSE frames of the organization's approval changes after event id `after`, live until the client leaves. */
  readonly stream: (orgId: string, after: string) => Stream.Stream<string>
}>()("svc/approvals/ApprovalFeed") {
  static readonly layer = Layer.effect(
    ApprovalFeed,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const hub = yield* SessionHub
      const metrics = yield* Metrics
      const config = yield* SvcConfig
      const box = yield* SecretBox
      const mac: CursorMac = (message) => box.mac("cursor", message)

      const list = Effect.fn("ApprovalFeed.list")(function*(orgId: string, options: {
        readonly status?: ApprovalStatus | undefined
        readonly limit: number
        readonly cursor?: string | undefined
      }) {
        const scope: CursorScope = { orgId, list: "approvals", filters: [options.status] }
        const bound = yield* seqBound(mac, scope, options.cursor)
        const after = Option.getOrElse(bound, () => "0")
        const rows = yield* ListRows.all(sql`
          SELECT ${sql.literal(LIST_COLUMNS)} FROM ${sql.literal(LIST_FROM)}
          WHERE a.org_id = ${orgId} AND a.seq > ${after}
            ${options.status === undefined ? sql`` : sql`AND a.status = ${options.status}`}
          ORDER BY a.seq LIMIT ${options.limit + 1}
        `)
        const items = rows.slice(0, options.limit)
        const last = items[items.length - 1]
        return {
          approvals: items.map(listItemOf),
          next_cursor: rows.length > options.limit && last !== undefined ? encodeCursor(mac, scope, last.seq) : null
        }
      })

      const stream = (orgId: string, after: string) =>
        hubFrames(hub, {
          key: approvalsTopic(orgId),
          after,
          open: metrics.streamOpen("approvals"),
          read: (from) =>
            EventRows.all(sql`
              SELECT seq::text AS seq, name, data FROM approval_stream_events
              WHERE org_id = ${orgId} AND seq > ${from} ORDER BY seq LIMIT ${STREAM_BATCH}
            `),
          keepAliveMs: config.sseKeepAliveMs,
          pollMs: config.ssePollMs
        })

      return ApprovalFeed.of({ list, stream })
    })
  )
}
