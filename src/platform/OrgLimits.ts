/**
 * Caps on per-organization collections (notification endpoints, approval
 * policies, tasks, active API keys), counted safely under concurrent creates, on PGlite and
 * on a PostgreSQL server shared by several processes; the byte quotas
 * of what an organization stores (feedback, logged runs), kept in
 * `org_usage` (migrations 0631, 0791); and per-minute rates of an
 * operation (promotes, policy dry runs), kept in `org_rate_limits`.
 *
 * Inside the creating transaction, the organization's row is locked first
 * (`FOR NO KEY UPDATE`), then the collection is counted: two creates of one
 * organization take turns, and the second counts what the first inserted
 * (under READ COMMITTED each statement sees what committed before it). The
 * lock does not conflict with the `KEY SHARE` locks that foreign keys take,
 * so inserts elsewhere that merely reference the organization never wait.
 */
import { Effect, Schema } from "effect"
import type { SqlClient, SqlError } from "effect/sql"
import { LimitReached, RateLimited } from "../api/Errors.ts"
import { BigIntText, rowsOf } from "./Rows.ts"

const CountRow = Schema.Struct({ count: BigIntText })

/** The tables with a per-organization cap, and which of their rows count against it: a revoked API key no longer does. */
const COUNTED = {
  notification_endpoints: "",
  approval_policies: "",
  tasks: "",
  api_keys: " AND revoked_at IS NULL",
  reviewer_groups: "",
  mcp_servers: "",
  // A delegation ended, or whose window is over, no longer counts.
  reviewer_delegations: " AND ended_at IS NULL AND ends_at > now()"
} as const
type CappedTable = keyof typeof COUNTED

/**
 * Locks the organization's row and counts its rows of `table`, up to `cap`
 * (the count stops there: its cost is bounded by the cap). Run it inside
 * the transaction that inserts.
 */
export const countForCap = (
  sql: SqlClient.SqlClient,
  orgId: string,
  table: CappedTable,
  cap: number
): Effect.Effect<number, SqlError.SqlError> =>
  Effect.gen(function*() {
    yield* sql`SELECT 1 FROM orgs WHERE id = ${orgId} FOR NO KEY UPDATE`
    const [row] = yield* rowsOf(table, CountRow).decoded(sql`
      SELECT count(*) AS count FROM (SELECT 1 FROM ${sql.literal(table)} WHERE org_id = ${orgId}${
      sql.literal(COUNTED[table])
    } LIMIT ${cap}) AS capped
    `)
    return Number(row?.count ?? 0)
  })

/**
 * Fails with the cap's problem when the organization already holds `cap`
 * counted rows of `table` (`limit` names the setting; `what` the rows).
 */
export const refuseAtCap = (
  sql: SqlClient.SqlClient,
  orgId: string,
  table: CappedTable,
  cap: { readonly value: number; readonly limit: string; readonly detail: string }
): Effect.Effect<void, LimitReached | SqlError.SqlError> =>
  Effect.flatMap(countForCap(sql, orgId, table, cap.value), (count) =>
    count >= cap.value
      ? Effect.fail(new LimitReached({ limit: cap.limit, limit_value: cap.value, detail: cap.detail }))
      : Effect.void)

/**
 * A byte quota: what the organization stores of `kind` (the sum of its
 * `org_usage` shards), at most `value` bytes, the setting `limit`. The
 * statement that stores checks and counts the bytes itself (in its
 * connection's shard, `usageCountText`); `refuseOverQuota` says why it refused.
 */
export interface ByteQuota {
  readonly kind: "feedback" | "runs"
  readonly limit: string
  readonly value: number
  /** What is stored, as the problem says it: "feedback", "logged runs". */
  readonly what: string
}

/**
 * SQL text of a storing statement's CTE that counts what it stored of
 * `kind`: `bytes` in one of the organization's 16 shards, once for each row
 * of `from` (each argument the text of a parameter or a CTE).
 *
 * The shard is the server connection's (its backend's process id modulo
 * 16): a connection runs one statement at a time, so the connections of one
 * pool, whose process ids are mostly consecutive, seldom wait on each
 * other's usage row, as statements did on a shard picked at random. Measured
 * with svc's feedback INSERT alone, 10 connections in alternating blocks on
 * the PostgreSQL server: 660 µs of backend CPU per statement against 758
 * (bench/notes/request-path.md, "Eighth round"). On the embedded database
 * (one backend) every write counts in one shard, where nothing waits.
 */
export const usageCountText = (
  kind: ByteQuota["kind"],
  p: { readonly orgId: string; readonly bytes: string; readonly from: string }
) =>
  `INSERT INTO org_usage (org_id, kind, shard, bytes)
    SELECT ${p.orgId}, '${kind}', pg_backend_pid() % 16, ${p.bytes} FROM ${p.from}
    ON CONFLICT (org_id, kind, shard) DO UPDATE SET bytes = org_usage.bytes + excluded.bytes`

const UsageRows = rowsOf("org_usage", Schema.Struct({ bytes: BigIntText }))

/** The bytes the organization stores of the quota's kind, read now. */
export const readUsage = (sql: SqlClient.SqlClient, orgId: string, quota: ByteQuota): Effect.Effect<number> =>
  Effect.map(
    UsageRows.one(
      sql`SELECT (SELECT coalesce(sum(bytes), 0) FROM org_usage WHERE org_id = ${orgId} AND kind = ${quota.kind}) AS bytes`
    ),
    (row) => Number(row?.bytes ?? 0)
  )

/** The quota's problem when `bytes` more than `used` would pass it. */
export const overQuota = (quota: ByteQuota, used: number, bytes: number): Effect.Effect<void, LimitReached> =>
  used + bytes > quota.value
    ? Effect.fail(
      new LimitReached({
        limit: quota.limit,
        limit_value: quota.value,
        detail:
          `The organization stores ${used} bytes of ${quota.what}; this one (${bytes} bytes) would pass the ${quota.value} allowed (${quota.limit}).`
      })
    )
    : Effect.void

/** Fails with the quota's problem when, read now, `bytes` more would pass it. */
export const refuseOverQuota = (
  sql: SqlClient.SqlClient,
  orgId: string,
  quota: ByteQuota,
  bytes: number
): Effect.Effect<void, LimitReached> =>
  Effect.flatMap(readUsage(sql, orgId, quota), (used) => overQuota(quota, used, bytes))

/** A per-organization rate: at most `perMinute` of the operation `name` a minute, the setting `limit`; `what` names it in the problem. */
export interface OrgRate {
  readonly name: string
  readonly perMinute: number
  readonly limit: string
  readonly what: string
}

const WaitRows = rowsOf("org_rate_limits", Schema.Struct({ seconds: BigIntText }))

/**
 * Takes one of the organization's `rate`, or fails with `429 RATE_LIMITED`
 * saying when to retry. Claimed from the database so that every process
 * shares it: a generic cell rate (GCRA) per organization and operation.
 * `tat` is when the organization's allowance is next fully spent; a claim
 * moves it one interval (a minute / the rate) later, and is allowed while
 * that stays within a minute of now: bursts up to the rate, then one per
 * interval. The database's clock decides.
 */
export const claimRate = (
  sql: SqlClient.SqlClient,
  orgId: string,
  rate: OrgRate
): Effect.Effect<void, RateLimited | SqlError.SqlError> =>
  Effect.gen(function*() {
    const interval = `${60_000 / rate.perMinute} milliseconds`
    const claimed = yield* sql`
      INSERT INTO org_rate_limits AS r (org_id, name, tat)
      VALUES (${orgId}, ${rate.name}, now() + ${interval}::interval)
      ON CONFLICT (org_id, name) DO UPDATE
        SET tat = greatest(r.tat, now()) + ${interval}::interval
        WHERE greatest(r.tat, now()) + ${interval}::interval <= now() + interval '1 minute'
      RETURNING 1
    `
    if (claimed.length > 0) return
    const [wait] = yield* WaitRows.decoded(sql`
      SELECT ceil(extract(epoch FROM greatest(tat, now()) + ${interval}::interval - now() - interval '1 minute'))::int AS seconds
      FROM org_rate_limits WHERE org_id = ${orgId} AND name = ${rate.name}
    `)
    const seconds = Math.max(1, Number(wait?.seconds ?? 1))
    return yield* new RateLimited({
      limit: rate.limit,
      limit_value: rate.perMinute,
      retry_after_seconds: seconds,
      detail:
        `The organization made ${rate.perMinute} ${rate.what} within a minute, the most allowed (${rate.limit}); retry in ${seconds} s.`
    })
  })
