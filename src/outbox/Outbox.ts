/**
 * The outbox: the `events` table and its dispatch cursor (`event_dispatch`),
 * and nothing else writes them (a structure test holds this). An event is
 * written in the transaction of the change it tells of, its body built here
 * once as the exact bytes every delivery, retry and replay sends; the
 * dispatcher (`notifications/dispatch/Dispatcher.ts`) takes the events past
 * the cursor with the pieces below and moves it in its fan-out statement,
 * which also answers whether events still wait past it (`HeldPastPass.ts`);
 * retention prunes what the cursor passed.
 *
 * Bodies: `{"id","type","org_id","occurred_at", ...}` then the subject:
 * `approval` (the snapshot, in the key order of `ApprovalSnapshot`) or
 * `endpoint` (`EndpointEvent` in src/api/Events.ts).
 */
import type { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Schema } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import { ApprovalSnapshot } from "../api/Approvals.ts"
import type { ApprovalEvent, EndpointEvent, EndpointSnapshot } from "../api/Events.ts"
import { newId } from "../platform/Ids.ts"
import { rowsOf } from "../platform/Rows.ts"

/** A place in a body the writing statement fills: an instant (`svc_iso` text, quoted here) or the task id (JSON text). */
class Hole {
  readonly quoted: boolean
  constructor(quoted: boolean) {
    this.quoted = quoted
  }
}
const INSTANT = new Hole(true)
const RAW = new Hole(false)

const SNAPSHOT_KEYS = Object.keys(ApprovalSnapshot.fields)

/** An approval event's body as a value, its snapshot's members in their fixed order. */
const approvalBody = (event: {
  readonly id: string
  readonly type: string
  readonly org_id: string
  readonly occurred_at: unknown
  readonly approval: Readonly<Record<string, unknown>>
}) => {
  const approval: Record<string, unknown> = {}
  for (const key of SNAPSHOT_KEYS) if (event.approval[key] !== undefined) approval[key] = event.approval[key]
  return { id: event.id, type: event.type, org_id: event.org_id, occurred_at: event.occurred_at, approval }
}

/** JSON text of `value` cut at its holes: n holes, n + 1 pieces. */
const piecesOf = (value: unknown): Array<string> => {
  if (value instanceof Hole) return value.quoted ? ["\"", "\""] : ["", ""]
  if (value === null || typeof value !== "object") return [JSON.stringify(value)]
  const parts: Array<Array<string>> = Array.isArray(value)
    ? value.map(piecesOf)
    : Object.entries(value).filter(([, v]) => v !== undefined).map(([k, v]) => {
      const inner = piecesOf(v)
      return [JSON.stringify(k) + ":" + inner[0], ...inner.slice(1)]
    })
  const out = [Array.isArray(value) ? "[" : "{"]
  parts.forEach((part, i) => {
    out[out.length - 1] += (i === 0 ? "" : ",") + part[0]
    out.push(...part.slice(1))
  })
  out[out.length - 1] += Array.isArray(value) ? "]" : "}"
  return out
}

/**
 * The exact JSON a webhook receiver gets for `event`:
 * `{"id","type","org_id","occurred_at","approval":{...}}` in that order.
 */
export const approvalEventBody = (event: ApprovalEvent): string => JSON.stringify(approvalBody(event))

/**
 * A new approval's `approval.requested` body, built as `approvalEventBody`
 * builds it, cut where the step statement inserts what only it knows: before
 * `occurred_at`, before `task_id`, before `deadline_at`, before `expires_at`,
 * the rest.
 */
export const requestedBodyPieces = (input: {
  readonly eventId: string
  readonly orgId: string
  readonly approvalId: string
  readonly sessionId: string
  readonly stepId: string
  readonly timeoutAction: string
  readonly rule?: string | undefined
  readonly quorum: number
  /** The reviewer group it is assigned to, if any. */
  readonly group?: string | undefined
}) =>
  piecesOf(approvalBody({
    id: input.eventId,
    type: "approval.requested",
    org_id: input.orgId,
    occurred_at: INSTANT,
    approval: {
      approval_id: input.approvalId,
      session_id: input.sessionId,
      step_id: input.stepId,
      task_id: RAW,
      status: "pending",
      deadline_at: INSTANT,
      expires_at: INSTANT,
      timeout_action: input.timeoutAction,
      rule: input.rule,
      ...(input.quorum > 1 ? { quorum: input.quorum, votes: [], approvals_remaining: input.quorum } : {}),
      ...(input.group === undefined ? {} : { assigned_group: input.group, escalation_level: 0 })
    }
  })) as [string, string, string, string, string]

/**
 * Appends an approval event. Call it inside the transaction that makes the
 * state change, and signal `Wakeups` topic `"events"` after commit.
 */
export const writeApprovalEvent = (
  sql: SqlClient.SqlClient,
  event: ApprovalEvent,
  /** Puts back what the event's snapshot holds as marks (`approvals/Edits.ts`, `markedEdit`). */
  splice: (json: string) => string = (json) => json
) =>
  sql`
    INSERT INTO events (id, org_id, type, occurred_at, body, label)
    VALUES (${event.id}, ${event.org_id}, ${event.type}, ${event.occurred_at}::timestamptz, ${
    splice(approvalEventBody(event))
  },
            ${`${event.type} ${event.approval.approval_id}`})
  `.pipe(Effect.asVoid)

/**
 * The `approval.requested` row the step statement (`agents/StepStatement.ts`)
 * writes with the approval: its body assembled around what only that
 * statement knows, as SQL text (`occurredAt`, `deadlineAt`, `expiresAt`:
 * `svc_iso` of an instant; `taskId`: JSON text), from the rows `from`.
 */
export const requestedEventInsert = (
  sql: SqlClient.SqlClient,
  input: Parameters<typeof requestedBodyPieces>[0] & {
    readonly occurredAt: Statement.Fragment
    readonly taskId: Statement.Fragment
    readonly deadlineAt: Statement.Fragment
    readonly expiresAt: Statement.Fragment
    /** The instant the row is written at, a `timestamptz`. */
    readonly at: Statement.Fragment
    readonly from: Statement.Fragment
  }
) => {
  const [e0, e1, e2, e3, e4] = requestedBodyPieces(input)
  return sql`
    INSERT INTO events (id, org_id, type, occurred_at, body, label)
    SELECT ${input.eventId}, ${input.orgId}, 'approval.requested', ${input.at},
      ${e0} || ${input.occurredAt} || ${e1} || ${input.taskId} || ${e2} || ${input.deadlineAt}
        || ${e3} || ${input.expiresAt} || ${e4},
      ${`approval.requested ${input.approvalId}`}
    FROM ${input.from}`
}

/** RFC 3339 UTC with milliseconds, as every other event's `occurred_at`. */
const ISO = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`

/**
 * The row of an operational event about the endpoint `changed` (a CTE that
 * answers `id, org_id, url_hint` and the instant the change stamped,
 * `stamp`), written in the statement that changes the endpoint.
 * `about_endpoint` keeps it from being delivered to the endpoint it is
 * about. `type` and `stamp` come from closed unions, never from a caller's
 * text.
 */
export const endpointEventInsert = (
  sql: PgClient.PgClient,
  event: {
    readonly type: EndpointEvent["type"]
    readonly stamp: Extract<keyof EndpointSnapshot, "deactivated_at" | "failing_since" | "certificate_expires_at">
    readonly active: boolean
    readonly reason: string
  }
) => {
  const eventId = newId()
  const type = sql.literal(`'${event.type}'`)
  const label = sql.literal(`'${event.type} '`)
  const stampKey = sql.literal(`'${event.stamp}'`)
  const stamp = sql.literal(event.stamp)
  return sql`
    INSERT INTO events (id, org_id, type, occurred_at, body, label, about_endpoint)
    SELECT ${eventId}, c.org_id, ${type}, now(),
           json_build_object(
             'id', ${eventId}::uuid, 'type', ${type}, 'org_id', c.org_id,
             'occurred_at', to_char(now() AT TIME ZONE 'UTC', ${sql.literal(ISO)}),
             'endpoint', json_build_object(
               'id', c.id, 'url_hint', c.url_hint, 'reason', ${event.reason}::text, 'active', ${
    sql.literal(String(event.active))
  },
               ${stampKey}, to_char(c.${stamp} AT TIME ZONE 'UTC', ${sql.literal(ISO)})
             )
           )::text,
           ${label} || c.id, c.id
    FROM changed c
    RETURNING id
  `
}

const BodyRows = rowsOf("events", Schema.Struct({ type: Schema.String, body: Schema.String }))

/** An event's type and body, read back when the process sending it does not hold it. */
export const eventBody = (sql: PgClient.PgClient, orgId: string, eventId: string | null) =>
  BodyRows.decoded(sql`SELECT type, body FROM events WHERE id = ${eventId} AND org_id = ${orgId}`)

/**
 * The CTE `cur`: the dispatch cursor, locked, for a statement with a CTE
 * `lock (locked)`; no row when another dispatcher holds the lock, nor when
 * one committed after this statement's snapshot was taken (the locking
 * read answers the row's last version, the snapshot an older one): the
 * events that one marked may look unmarked to this snapshot, so this
 * statement takes nothing and the next one looks again.
 */
export const dispatchCursor = (sql: PgClient.PgClient) =>
  sql`cur AS MATERIALIZED (
    SELECT writer, seq FROM (
      SELECT writer, seq, xmin::text AS version FROM event_dispatch WHERE (SELECT locked FROM lock) FOR UPDATE
    ) c WHERE version = (SELECT xmin::text FROM event_dispatch)
  )`

/**
 * The next `batch` events past the cursor `cur`, in `(writer, seq)` order,
 * of writers older than every transaction still running: those are all
 * committed or gone, so no event can appear later below the last one taken
 * (a transaction that took a lower seq and commits after a higher one has a
 * writer above the horizon until it ends; one that has not written yet will
 * have a newer writer). Read in order from `events_writer_seq_idx` between
 * the row values. The limit is written into the statement (one prepared
 * statement per batch size), so that the server may keep a generic plan
 * for it instead of planning every execution anew.
 */
export const undispatchedEvents = (sql: PgClient.PgClient, batch: number) =>
  sql`
    SELECT seq, id, org_id, type, body, label, about_endpoint, writer FROM events
    WHERE (writer, seq) > ((SELECT writer FROM cur), (SELECT seq FROM cur))
      AND writer < pg_snapshot_xmin(pg_current_snapshot())
    ORDER BY writer, seq LIMIT ${sql.literal(String(Math.trunc(batch)))}
  `

/** How long committed events may wait past the cursor for an older transaction before they are fanned out one by one. */
const HELD_FOR = Duration.seconds(1)

/**
 * The events past the cursor `cur` held back longer than `HELD_FOR` by an
 * older transaction still running (a CTE `nxt` of the events the cursor
 * takes, and only when it takes none): fanned out now, each marked on its
 * own (its `writer` cleared: out of the cursor's range for good) and locked
 * as the mark was. The cursor stays where it is, so what the older
 * transaction writes is not passed over; a transaction left open anywhere
 * on the cluster costs the per-event mark, not the fan-out's progress.
 */
const heldEvents = (sql: PgClient.PgClient, batch: number) =>
  sql`
    SELECT seq, id, org_id, type, body, label, about_endpoint, writer FROM events
    WHERE (writer, seq) > ((SELECT writer FROM cur), (SELECT seq FROM cur))
      AND dispatched_at < now() - ${sql.literal(`interval '${Duration.toSeconds(HELD_FOR)} seconds'`)}
      AND NOT EXISTS (SELECT 1 FROM nxt)
    ORDER BY writer, seq LIMIT ${sql.literal(String(Math.trunc(batch)))}
    FOR UPDATE SKIP LOCKED
  `

/**
 * The CTEs of a fan-out statement that take up to `batch` events: `ev`,
 * those past the cursor in order and those held back too long; the cursor
 * moved past the first (a new version of its row whenever anything is
 * taken, see `dispatchCursor`), the second marked. `lockId`: the advisory
 * lock that keeps two dispatchers from interleaving (one that finds it
 * held takes nothing).
 */
export const takeEvents = (sql: PgClient.PgClient, batch: number, lockId: number) =>
  sql`
    lock AS (SELECT pg_try_advisory_xact_lock(${lockId}) AS locked),
    ${dispatchCursor(sql)},
    nxt AS MATERIALIZED (${undispatchedEvents(sql, batch)}),
    late AS MATERIALIZED (${heldEvents(sql, batch)}),
    ev AS MATERIALIZED (SELECT * FROM nxt UNION ALL SELECT * FROM late),
    moved AS (
      UPDATE event_dispatch c SET writer = coalesce(l.writer, c.writer), seq = coalesce(l.seq, c.seq)
      FROM (SELECT writer, seq FROM nxt ORDER BY writer DESC, seq DESC LIMIT 1) l
      RIGHT JOIN (SELECT 1 WHERE EXISTS (SELECT 1 FROM ev)) taken ON true
      RETURNING c.seq
    ),
    marked AS (UPDATE events e SET writer = NULL FROM late WHERE e.seq = late.seq RETURNING e.seq)`

/**
 * Deletes up to `batch` events dispatched before `before` (SQL) that no delivery
 * refers to and the cursor passed; answers the deleted rows.
 */
export const pruneEvents = (sql: PgClient.PgClient, before: Statement.Fragment, batch: number) =>
  sql`
    DELETE FROM events WHERE seq IN (
      SELECT e.seq FROM events e
      WHERE e.dispatched_at < ${before}
        AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id)
        -- Written since migration 0720, an event is dispatched once the cursor passed it.
        AND NOT EXISTS (SELECT 1 FROM event_dispatch c WHERE (e.writer, e.seq) > (c.writer, c.seq))
      ORDER BY e.dispatched_at
      LIMIT ${batch}
      FOR UPDATE OF e SKIP LOCKED
    )
    RETURNING 1 AS deleted
  `
