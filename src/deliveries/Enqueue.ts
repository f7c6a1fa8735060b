/**
 * Adding deliveries under the capacity rule: past `capacity` undelivered
 * deliveries of its target a new delivery is recorded as `failed` ("queue
 * full"), never dropped. The count is the target row's `undelivered`: one
 * row read, however long the queue, and kept by the enqueueing statement
 * itself (`countedTargets`; updates and deletes keep it by triggers).
 */
import type { PgClient } from "@effect/sql-pg"
import { Duration, Effect, type Schema } from "effect"
import type { Statement } from "effect/sql"
import { newId } from "../platform/Ids.ts"
import * as Rows from "./Rows.ts"
import { type AttemptedInput, COLUMNS, type EnqueueInput, LOGGED_KINDS, toDelivery } from "./Types.ts"

/**
 * The capacity rule over a CTE `input` of `(ord, id?, org_id, kind,
 * target_id, label, event_id, payload, meta, capacity)`: the CTEs that rank
 * each row behind its target's undelivered deliveries and insert it,
 * `failed` ("queue full") past `capacity`, as `inserted` (returning
 * `returning`). Row k of a target in the batch finds (undelivered before) +
 * (k - 1) ahead of it: the same answer k single enqueues would give.
 */
const underCapacity = (sql: PgClient.PgClient, id: "id" | "gen_random_uuid()", returning: string) =>
  sql`
    waiting AS (
      SELECT t.target_id, t.org_id, t.kind, coalesce(c.undelivered, 0) AS n,
             t.kind IN (${
    sql.literal(LOGGED_KINDS.map((kind) => `'${kind}'`).join(", "))
  }) AND NOT coalesce(c.strict, false) AS logged
      FROM (
        SELECT target_id, (array_agg(org_id))[1] AS org_id, (array_agg(kind))[1] AS kind
        FROM input GROUP BY target_id
      ) t
      LEFT JOIN delivery_targets c ON c.id = t.target_id
    ),
    ranked AS (
      SELECT i.*, w.logged, w.n + row_number() OVER (PARTITION BY i.target_id ORDER BY i.ord) AS position
      FROM input i JOIN waiting w ON w.target_id = i.target_id
    ),
    ${
    countedTargets(
      sql,
      sql`SELECT target_id, org_id, kind, (position <= capacity) AS undelivered,
      (position <= capacity AND logged) AS logged FROM ranked`
    )
  },
    inserted AS (
      INSERT INTO deliveries (id, org_id, kind, target_id, status, label, event_id, payload, meta, last_error, finished_at)
      SELECT ${sql.literal(id)}, org_id, kind, target_id,
             CASE WHEN position > capacity THEN 'failed' WHEN logged THEN 'logged' ELSE 'queued' END,
             label, event_id, payload, coalesce(meta, '{}'::jsonb),
             CASE WHEN position > capacity
               THEN 'queue full: the target already has ' || capacity || ' undelivered deliveries' END,
             CASE WHEN position > capacity THEN now() END
      FROM ranked WHERE (SELECT count(*) FROM counted) >= 0 ORDER BY ord
      RETURNING ${sql.literal(returning)}
    )
  `

/**
 * The CTE `counted`: the undelivered count of every target of the new rows
 * (`rows`: `(target_id, org_id, kind, undelivered boolean)`), kept in the
 * enqueueing statement itself (no trigger: migration 0600). Every target
 * row is upserted, in id order (the lock order of `Targets.ts`), even when
 * nothing is added to it: the row's lock is what an organization's deletion
 * meets (the target rows keep the foreign key the deliveries no longer
 * have), and a target's first delivery creates it. The inserting CTE reads
 * `counted` so that the targets are locked before any delivery is written.
 */
const countedTargets = (sql: PgClient.PgClient, rows: Statement.Fragment) =>
  sql`
    counted AS (
      INSERT INTO delivery_targets AS t (id, org_id, kind, undelivered, log_pending)
      SELECT target_id, (array_agg(org_id))[1], (array_agg(kind))[1], (count(*) FILTER (WHERE undelivered))::int,
             (count(*) FILTER (WHERE logged))::int
      FROM (${rows}) r
      GROUP BY target_id ORDER BY target_id
      ON CONFLICT (id) DO UPDATE SET undelivered = t.undelivered + EXCLUDED.undelivered,
        log_pending = t.log_pending + EXCLUDED.log_pending
        WHERE EXCLUDED.undelivered <> 0
      RETURNING t.id
    )
  `

/** The columns every new delivery row sent as JSON starts with: its place in the batch, a fresh id, whose it is and where it goes. */
const newRow = (input: { readonly orgId: string; readonly kind: string; readonly targetId: string }, ord: number) => ({
  ord,
  id: newId(),
  org_id: input.orgId,
  kind: input.kind,
  target_id: input.targetId
})

// With `readBack` the new rows in input order; without, one row with their number.
const insertMany = (sql: PgClient.PgClient, inputs: ReadonlyArray<EnqueueInput>, readBack: boolean) => {
  const rows = inputs.map((input, ord) => ({
    ...newRow(input, ord),
    label: input.label ?? null,
    event_id: input.eventId ?? null,
    payload: input.payload ?? null,
    meta: input.meta ?? {},
    capacity: input.capacity
  }))
  return sql`
    WITH input AS (
      SELECT * FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS x(
        ord int, id uuid, org_id uuid, kind text, target_id uuid, label text, event_id uuid,
        payload text, meta jsonb, capacity int)
    ),
    ${underCapacity(sql, "id", readBack ? COLUMNS : "id")}
    ${
    readBack
      ? sql`SELECT inserted.*, input.ord FROM inserted JOIN input ON input.id = inserted.id ORDER BY input.ord`
      : sql`SELECT count(*)::int AS n FROM inserted`
  }
  `
}
export const enqueueMany = Effect.fnUntraced(function*(sql: PgClient.PgClient, inputs: ReadonlyArray<EnqueueInput>) {
  if (inputs.length === 0) return []
  return (yield* Rows.deliveries(insertMany(sql, inputs, true)).pipe(Effect.orDie)).map(toDelivery)
})
export const enqueue = (sql: PgClient.PgClient, input: EnqueueInput) =>
  Effect.map(enqueueMany(sql, [input]), (delivered) => delivered[0]!)
export const enqueueAll = Effect.fnUntraced(function*(sql: PgClient.PgClient, inputs: ReadonlyArray<EnqueueInput>) {
  if (inputs.length === 0) return 0
  const [counted] = yield* Rows.count(insertMany(sql, inputs, false)).pipe(Effect.orDie)
  return counted?.n ?? 0
})

/** The caller's part of `enqueueFrom` (`DeliveryQueue.enqueueFrom` says what each is). */
export interface EnqueueSource {
  readonly with: Statement.Fragment
  readonly input: Statement.Fragment
  readonly select: Statement.Fragment
}

export const enqueueFrom = <S extends Schema.Constraint & { readonly DecodingServices: never }>(
  sql: PgClient.PgClient,
  source: EnqueueSource,
  table: string,
  row: S
) =>
  Rows.decodeRows(table, row)(sql`
    WITH ${source.with},
    input AS (${source.input}),
    ${underCapacity(sql, "gen_random_uuid()", "kind, status")}
    ${source.select}
  `).pipe(Effect.orDie)

/**
 * Stores deliveries whose first attempt was already made (`AttemptedInput`),
 * in order, in one statement: one attempt counted, finished unless
 * `retrying`. No capacity rule: what was sent is recorded whatever the queue
 * holds (a `retrying` one counts as undelivered from then on).
 */
export const recordAttempted = Effect.fnUntraced(
  function*(sql: PgClient.PgClient, inputs: ReadonlyArray<AttemptedInput>) {
    if (inputs.length === 0) return
    const rows = inputs.map((input, ord) => ({
      ...newRow(input, ord),
      status: input.status,
      payload: input.payload,
      meta: input.meta,
      error: input.error,
      retry_after_ms: input.retryAfter === undefined ? 0 : Duration.toMillis(input.retryAfter)
    }))
    yield* sql`
    WITH input AS (
      SELECT * FROM jsonb_to_recordset(${sql.json(rows)}::jsonb) AS x(
        ord int, id uuid, org_id uuid, kind text, target_id uuid, status text, payload text, meta jsonb, error text,
        retry_after_ms float8)
    ),
    ${
      countedTargets(
        sql,
        sql`SELECT target_id, org_id, kind, (status = 'retrying') AS undelivered, false AS logged FROM input`
      )
    }
    INSERT INTO deliveries (id, org_id, kind, target_id, status, payload, meta, attempts, last_error, next_attempt_at, finished_at)
    SELECT x.id, x.org_id, x.kind, x.target_id, x.status, x.payload, x.meta, 1, x.error,
           now() + make_interval(secs => x.retry_after_ms / 1000), CASE WHEN x.status <> 'retrying' THEN now() END
    FROM input x WHERE (SELECT count(*) FROM counted) >= 0
    ORDER BY x.ord
  `.pipe(Effect.orDie)
  }
)
