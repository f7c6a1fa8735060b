/**
 * The organization's approvals as the console sees them: the list (with the
 * governed step's tool, action class and arguments) and the stream of every
 * approval change.
 *
 * Each approval transaction appends its changes to `approval_stream_events`
 * without taking any lock of the organization: an event's id is its
 * transaction's id times `STREAM_IDS_PER_TRANSACTION` plus its place in the
 * transaction (`streamId`). Transactions commit in any order, so a reader
 * takes only the events of transactions older than the oldest one still
 * running (`STREAM_HORIZON`): those are final, and every event it may see
 * later has a higher id. So a reader resuming after id N misses nothing and
 * sees nothing twice, and the ids grow but are not consecutive. After
 * commit, the `hub:approvals:<org>` signal wakes the streams, here and
 * (NOTIFY) in other processes.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema, Stream } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import type { ApprovalEventType, ApprovalListItem, ApprovalStatus } from "../api/Approvals.ts"
import { InvalidRequest } from "../api/Errors.ts"
import { Metrics } from "../observability/Metrics.ts"
import { SvcConfig } from "../platform/Config.ts"
import { SecretBox } from "../platform/Crypto.ts"
import { type CursorMac, type CursorScope, keysetPage, type PageRequest } from "../platform/Cursor.ts"
import { BigIntText, JsonColumn, rowsOf, Timestamp } from "../platform/Rows.ts"
import { hubFrames, SessionHub, STREAM_BATCH } from "../streams/SessionEvents.ts"
import { reviews } from "./Deciders.ts"
import { ApprovalColumns, snapshotOf } from "./Events.ts"
import { votesColumns } from "./Votes.ts"

/** The `SessionHub` key that the organization's approval streams watch. */
export const approvalsTopic = (orgId: string) => `approvals:${orgId}`

/** One change to append: its event type and the approval it concerns. */
export interface StreamEntry {
  readonly type: ApprovalEventType
  readonly approvalId: string
}

/** An approval with its step (`LIST_COLUMNS` of `LIST_FROM`). */
export const ListColumns = Schema.Struct({
  ...ApprovalColumns.fields,
  seq: BigIntText,
  escalation_seconds: Schema.NullOr(Schema.Number),
  escalated: Schema.Boolean,
  created_at: Timestamp,
  tool: Schema.NullOr(Schema.String),
  action_class: Schema.NullOr(Schema.String),
  arguments: Schema.NullOr(JsonColumn(Schema.Json)),
  escalation_chain: Schema.NullOr(Schema.Array(Schema.String)),
  /** JSON text: the names of the named API keys among its deciders (`KEY_NAMES`), by id. */
  key_names: Schema.NullOr(Schema.String)
})
export type ListRow = typeof ListColumns.Type
const ListRows = rowsOf("approvals", ListColumns)
const EventRows = rowsOf(
  "approval_stream_events",
  Schema.Struct({
    seq: Schema.String,
    name: Schema.String,
    data: Schema.String,
    final: Schema.Boolean
  })
)

/** Events one transaction may append to an organization's approval stream (a decision that finds every deadline past appends 4). */
const STREAM_IDS_PER_TRANSACTION = 1024

/** SQL: the id of the `k`-th (from 0) stream event of the current transaction. */
export const streamId = (k: number) => `(pg_current_xact_id()::text::bigint * ${STREAM_IDS_PER_TRANSACTION} + ${k})`

/** SQL: ids below this are of finished transactions (committed or not): no lower id can appear any more. */
const STREAM_HORIZON = `(pg_snapshot_xmin(pg_current_snapshot())::text::bigint * ${STREAM_IDS_PER_TRANSACTION})`

/** How long a reader waits, at most, for transactions older than the events it found to finish before it answers with what is final. */
const HORIZON_WAIT_MS = [2, 5, 10, 20, 50, 100, 200]

/**
 * SQL: the names of the API keys an approval `a` names as deciders (its
 * decider and every voter, the person behind each and whom each counted
 * for), as JSON text by id; null when none has a name. Each id is looked up
 * by the keys' primary key; deciders that are not key ids (`console:…`,
 * `email:…`) are never cast.
 */
const KEY_NAMES = `(SELECT json_object_agg(k.id::text, k.name)::text FROM api_keys k
  WHERE k.org_id = a.org_id AND k.name IS NOT NULL AND k.id IN (
    SELECT CASE WHEN d.who ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN d.who::uuid END FROM (
      SELECT a.decided_by AS who
      UNION SELECT v.decided_by FROM approval_votes v WHERE v.approval_id = a.id
      UNION SELECT v.person FROM approval_votes v WHERE v.approval_id = a.id
      UNION SELECT v.decided_for FROM approval_votes v WHERE v.approval_id = a.id
    ) d)) AS key_names`

/** The columns of `approvals a` joined with its step `s`, for `ListRow`. */
export const LIST_COLUMNS =
  "a.seq::text AS seq, a.id, a.org_id, a.session_id, a.step_id, a.task_id, a.status, a.deadline_at, a.expires_at, a.timeout_action, a.decided_at, a.decided_by, a.decision_reason, a.rule, a.approved_arguments, a.arguments_changed, a.arguments_digest, a.response, a.escalation_seconds, a.escalated, a.assigned_group, a.escalation_level, a.escalation_chain, a.created_at, s.tool, s.action_class, s.arguments, " +
  `${KEY_NAMES}, ${votesColumns("a")}`

export const LIST_FROM = "approvals a LEFT JOIN agent_steps s ON s.session_id = a.session_id AND s.step_id = a.step_id"

export const listItemOf = (row: ListRow): ApprovalListItem => ({
  ...snapshotOf(row),
  tool: row.tool ?? "",
  action_class: row.action_class ?? "",
  arguments: row.arguments,
  escalation: row.escalation_seconds === null ? "none" : row.escalated ? "escalated" : "pending",
  ...(row.escalation_chain === null || row.escalation_chain.length === 0
    ? {}
    : { escalation_chain: row.escalation_chain }),
  requested_at: row.created_at,
  ...(row.key_names === null ? {} : { key_names: JSON.parse(row.key_names) as Record<string, string> })
})

/** `LIST_COLUMNS` without what an edit or an answer settled (null), for `appendApprovalStream`'s `edited`. */
const LIST_COLUMNS_BUT_EDIT = LIST_COLUMNS
  .replace("a.approved_arguments,", "NULL::jsonb AS approved_arguments,")
  .replace("a.response,", "NULL::jsonb AS response,")

/**
 * Appends `entries` to the organization's approval stream. Run it once per
 * transaction, inside the transaction that made the changes, after them;
 * each event carries the approval as it stands then. `edited`: what a
 * decision of this transaction settled on its approval, which its caller
 * holds, so it is not read back: as marks and their splice (`Edits.ts`,
 * `markedEdit`).
 */
export const appendApprovalStream = (
  sql: SqlClient.SqlClient,
  orgId: string,
  entries: ReadonlyArray<StreamEntry>,
  edited?: {
    readonly row: Pick<ListRow, "id" | "approved_arguments" | "response">
    readonly splice: (json: string) => string
  }
) =>
  Effect.forEach(entries, (entry, k) =>
    Effect.gen(function*() {
      const known = edited !== undefined && edited.row.id === entry.approvalId
      const row = yield* ListRows.one(sql`
        SELECT ${sql.literal(known ? LIST_COLUMNS_BUT_EDIT : LIST_COLUMNS)} FROM ${sql.literal(LIST_FROM)}
        WHERE a.id = ${entry.approvalId}
      `)
      if (row === undefined) return
      const data = known
        ? edited.splice(JSON.stringify(listItemOf({
          ...row,
          approved_arguments: edited.row.approved_arguments,
          response: edited.row.response
        })))
        : JSON.stringify(listItemOf(row))
      yield* sql`
        INSERT INTO approval_stream_events (org_id, seq, name, data)
        VALUES (${orgId}, ${sql.literal(streamId(k))}, ${entry.type}, ${data})
      `
    }), { discard: true })

interface ListOptions extends PageRequest {
  readonly status?: ApprovalStatus | undefined
  /** Only the approvals this decider may decide as a member of their group or a member's delegate. */
  readonly assignedTo?: string | undefined
}

export class ApprovalFeed extends Context.Service<ApprovalFeed, {
  /** The organization's approvals, oldest request first, optionally of one status. */
  readonly list: (
    orgId: string,
    options: ListOptions
  ) => Effect.Effect<
    { readonly approvals: ReadonlyArray<ApprovalListItem>; readonly next_cursor: string | null },
    InvalidRequest
  >
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

      const list = Effect.fn("ApprovalFeed.list")(function*(orgId: string, options: ListOptions) {
        const scope: CursorScope = { orgId, list: "approvals", filters: [options.status, options.assignedTo] }
        const { items, next_cursor } = yield* keysetPage(mac, scope, options, (bound, rows) =>
          ListRows.all(sql`
            SELECT ${sql.literal(LIST_COLUMNS)} FROM ${sql.literal(LIST_FROM)}
            WHERE a.org_id = ${orgId} AND a.seq > ${Option.getOrElse(bound, () => "0")}
              ${options.status === undefined ? sql`` : sql`AND a.status = ${options.status}`}
              ${
            options.assignedTo === undefined
              ? sql``
              : sql`AND a.assigned_group IS NOT NULL AND ${
                reviews(sql, orgId, options.assignedTo, sql`a.assigned_group`)
              }`
          }
            ORDER BY a.seq LIMIT ${rows}
          `))
        return { approvals: items.map(listItemOf), next_cursor }
      })

      const readOnce = (orgId: string, from: string) =>
        EventRows.all(sql`
          SELECT e.seq::text AS seq, e.name, e.data, e.seq < ${
          sql.literal(STREAM_HORIZON)
        } AS final FROM approval_stream_events e
          WHERE e.org_id = ${orgId} AND e.seq > ${from} ORDER BY e.seq LIMIT ${STREAM_BATCH}
        `)

      /**
       * The events after `from` that are final (no later event can have a
       * lower id). An event of a transaction that committed while an older
       * one still runs waits for it, briefly: approval transactions are one
       * statement or a few, so this takes milliseconds. After the last wait
       * (about 0.4 s: a long transaction elsewhere in the database, even in
       * another database of the server, as transaction ids are the
       * server's) what is final is answered and the rest is `held`: the
       * stream reads again soon (`HELD_RETRY_MS`), not at its next poll.
       */
      const readFinal = (orgId: string, from: string) =>
        Effect.gen(function*() {
          for (let attempt = 0;; attempt++) {
            const rows = yield* readOnce(orgId, from)
            const final = rows.findIndex((row) => !row.final)
            if (final === -1) return { rows, held: false }
            if (attempt >= HORIZON_WAIT_MS.length) return { rows: rows.slice(0, final), held: true }
            yield* Effect.sleep(HORIZON_WAIT_MS[attempt]!)
          }
        })

      const stream = (orgId: string, after: string) =>
        hubFrames(hub, {
          key: approvalsTopic(orgId),
          after,
          open: metrics.streamOpen("approvals"),
          read: (from) => readFinal(orgId, from),
          keepAliveMs: config.sseKeepAliveMs,
          pollMs: config.ssePollMs
        })

      return ApprovalFeed.of({ list, stream })
    })
  )
}

/** Deletes approval stream events written before `before` (`retention/Retention.ts`): at most `batch`, skipping rows another statement holds; answers the rows. */
export const pruneApprovalStream = (sql: SqlClient.SqlClient, before: Statement.Fragment, batch: number) =>
  sql`
    DELETE FROM approval_stream_events WHERE ctid IN (
      SELECT ctid FROM approval_stream_events WHERE created_at < ${before} LIMIT ${batch} FOR UPDATE SKIP LOCKED
    )
    RETURNING 1 AS deleted
  `
