/**
 * Retention: payloads no longer needed and finished deliveries past their
 * keep time. The background pruning (`src/retention`) runs the batched
 * `pruneRecords` and `pruneAttempts` among its rules, so that the queue's
 * rows are still written only here.
 */
import type { PgClient } from "@effect/sql-pg"
import { Effect } from "effect"
import type { Statement } from "effect/sql"
import type { DeliveryKind } from "../Types.ts"

export const prunePayloads = (sql: PgClient.PgClient, kind: DeliveryKind, keepFailedHours: number) =>
  sql`
    UPDATE deliveries SET payload = NULL
    WHERE kind = ${kind} AND payload IS NOT NULL AND (
      status IN ('delivered', 'partial')
      OR (status = 'failed' AND finished_at < now() - make_interval(hours => ${keepFailedHours}))
    )
    RETURNING id
  `.pipe(Effect.map((rows) => rows.length), Effect.orDie)

export const pruneFinished = (sql: PgClient.PgClient, kind: DeliveryKind, keepDays: number) =>
  sql`
    DELETE FROM deliveries
    WHERE kind = ${kind} AND finished_at < now() - make_interval(days => ${keepDays})
    RETURNING id
  `.pipe(Effect.map((rows) => rows.length), Effect.orDie)

/**
 * Deletes at most `batch` finished (`delivered` or `failed`) deliveries of
 * `kinds` finished over `olderThanSeconds` ago, oldest first, skipping rows
 * another statement holds (processes sharing the database split the work).
 * Their attempts go with them. Delivered rows of the log go with their
 * outcome rows (by the outcome's age), the rows first, then the outcome
 * rows that hold none any more: the count trigger reads the outcome rows to
 * know a deleted logged row was delivered. Answers how many rows went.
 */
export const pruneRecords = Effect.fnUntraced(function*(
  sql: PgClient.PgClient,
  kinds: ReadonlyArray<DeliveryKind>,
  olderThanSeconds: number,
  batch: number
) {
  const rows = yield* deleteOldest(
    sql,
    "deliveries",
    "id",
    "finished_at",
    batch,
    sql`
    status IN ('delivered', 'failed') AND kind IN ${
      sql.in(kinds)
    } AND finished_at < now() - make_interval(secs => ${olderThanSeconds})
  `
  )
  const logged = yield* sql`
    DELETE FROM deliveries d USING (
      SELECT target_id, seqs FROM delivery_outcomes
      WHERE at < now() - make_interval(secs => ${olderThanSeconds})
      ORDER BY at
      LIMIT ${batch}
    ) o
    WHERE d.target_id = o.target_id AND d.seq = ANY (o.seqs) AND d.status = 'logged' AND d.kind IN ${sql.in(kinds)}
    RETURNING 1 AS deleted
  `.pipe(Effect.orDie)
  const outcomes = yield* sql`
    DELETE FROM delivery_outcomes WHERE (target_id, to_seq) IN (
      SELECT x.target_id, x.to_seq FROM delivery_outcomes x
      WHERE x.at < now() - make_interval(secs => ${olderThanSeconds})
        AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.target_id = x.target_id AND d.seq = ANY (x.seqs) AND d.status = 'logged')
      ORDER BY x.at
      LIMIT ${batch}
      FOR UPDATE SKIP LOCKED
    )
    RETURNING 1 AS deleted
  `.pipe(Effect.orDie)
  return rows + logged.length + outcomes.length
})

/** Deletes at most `batch` attempts older than `olderThanSeconds` (their delivery keeps its count), the same way. */
export const pruneAttempts = (sql: PgClient.PgClient, olderThanSeconds: number, batch: number) =>
  deleteOldest(
    sql,
    "delivery_attempts",
    "ctid",
    "at",
    batch,
    sql`at < now() - make_interval(secs => ${olderThanSeconds})`
  )

/** Deletes at most `batch` rows of `table` that `where` selects, oldest (`at`) first, skipping rows another statement holds; answers how many. */
const deleteOldest = (
  sql: PgClient.PgClient,
  table: string,
  key: string,
  at: string,
  batch: number,
  where: Statement.Fragment
) =>
  sql`
    DELETE FROM ${sql(table)} WHERE ${sql(key)} IN (
      SELECT ${sql(key)} FROM ${sql(table)} WHERE ${where} ORDER BY ${sql(at)} LIMIT ${batch} FOR UPDATE SKIP LOCKED
    )
    RETURNING 1 AS deleted
  `.pipe(Effect.map((rows) => rows.length), Effect.orDie)
