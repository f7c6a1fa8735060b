/**
 * Reading the queue: a target's deliveries, one delivery, its attempts, and
 * what a target still has to deliver. Records are read through
 * `delivery_records` and `delivery_attempt_records` (migrations 0670, 0676), which
 * read a `logged` row's status, attempt and finish through its target's
 * cursor and lease and the outcome row holding it.
 */
import type { PgClient } from "@effect/sql-pg"
import { Effect, Option } from "effect"
import type { Statement } from "effect/sql"
import { MAX_SEQ } from "../log/OutcomeHeld.ts"
import * as Rows from "../Rows.ts"
import { loggedUndelivered } from "../Targets.ts"
import { type Attempt, COLUMNS, type DeliveryKind, type TargetRef, toDelivery, UNDELIVERED } from "../Types.ts"

/**
 * A target's newest deliveries, each `logged` row's record built by one
 * probe of `delivery_outcomes`. Its rows are bounded by row values, not by
 * equalities, which a planner without statistics takes for a single row
 * (then reading and building the target's whole history before sorting):
 * so the index is read backwards and only the rows listed are built.
 */
export interface ListInput extends TargetRef {
  readonly limit?: number | undefined
}

export const listStatement = (sql: PgClient.PgClient, input: ListInput) =>
  sql`
    SELECT ${sql.literal(COLUMNS)} FROM delivery_records
    WHERE (target_id, seq) >= (${input.targetId}::uuid, 0::bigint)
      AND (target_id, seq) <= (${input.targetId}::uuid, ${MAX_SEQ}::bigint)
      AND (org_id, kind) >= (${input.orgId}::uuid, ${input.kind}::text) AND (org_id, kind) <= (${input.orgId}::uuid, ${input.kind}::text)
    ORDER BY target_id DESC, seq DESC LIMIT ${input.limit ?? 50}
  `

export const list = (sql: PgClient.PgClient, input: ListInput) =>
  Rows.deliveries(listStatement(sql, input)).pipe(Effect.orDie, Effect.map((rows) => rows.map(toDelivery)))

export const get = (sql: PgClient.PgClient, input: { orgId: string; kind: DeliveryKind; deliveryId: string }) =>
  Rows.deliveries(sql`
    SELECT ${sql.literal(COLUMNS)} FROM delivery_records
    WHERE id = ${input.deliveryId} AND org_id = ${input.orgId} AND kind = ${input.kind}
  `).pipe(Effect.orDie, Effect.map(([row]) => Option.map(Option.fromNullishOr(row), toDelivery)))

/** One delivery's attempts, a `logged` row's one attempt read from its outcome row by one probe. */
export const attemptsStatement = (sql: PgClient.PgClient, deliveryId: string) =>
  sql`
    SELECT attempt, at, status_code, error, response_snippet, duration_ms FROM delivery_attempt_records
    WHERE delivery_id = ${deliveryId} ORDER BY attempt
  `

export const attempts = Effect.fnUntraced(function*(sql: PgClient.PgClient, deliveryId: string) {
  const rows = yield* Rows.attempts(attemptsStatement(sql, deliveryId)).pipe(Effect.orDie)
  return rows.map((row): Attempt => ({
    attempt: row.attempt,
    at: row.at,
    statusCode: row.status_code,
    error: row.error,
    responseSnippet: row.response_snippet,
    durationMs: row.duration_ms
  }))
})

/**
 * The target's undelivered rows (`meta` only): rows written queued, sending
 * or retrying, and logged rows past its cursor that no outcome row holds.
 */
const undeliveredRows = (sql: PgClient.PgClient, kind: DeliveryKind, targetId: string) =>
  sql`
    SELECT meta FROM deliveries
    WHERE kind = ${kind} AND target_id = ${targetId} AND status IN ${sql.in(UNDELIVERED as Array<string>)}
    UNION ALL
    SELECT d.meta FROM deliveries d
    WHERE d.kind = ${kind} AND d.target_id = ${targetId} AND d.status = 'logged' AND ${loggedUndelivered(sql, targetId)}
  `

/** `total` (an SQL aggregate over the target's undelivered rows `d`) as one number. */
const overUndelivered = (sql: PgClient.PgClient, kind: DeliveryKind, targetId: string, total: Statement.Fragment) =>
  Rows.count(sql`SELECT ${total} AS n FROM (${undeliveredRows(sql, kind, targetId)}) d`).pipe(
    Effect.orDie,
    Effect.map(([row]) => row!.n)
  )

export const undeliveredMetaSum = (sql: PgClient.PgClient, kind: DeliveryKind, targetId: string, key: string) =>
  overUndelivered(sql, kind, targetId, sql`coalesce(sum((meta->>${key})::int), 0)::int`)

export const undelivered = (sql: PgClient.PgClient, kind: DeliveryKind, targetId: string) =>
  overUndelivered(sql, kind, targetId, sql`count(*)::int`)
