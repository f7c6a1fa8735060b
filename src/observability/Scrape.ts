/**
 * One scrape of `/metrics`: the gauges read from the database, then the
 * registry rendered in the Prometheus text format.
 *
 * The database gauges describe the whole database (every `svc` process
 * sharing it reports the same values: aggregate them with `max`, not
 * `sum`). They are read at most once per `DATABASE_READ_EVERY`, however many
 * Prometheus servers scrape and however often: concurrent scrapes wait for
 * the one read under way and share it. Each read is three short statements,
 * none of which scans the deliveries:
 *
 * - per kind, the queue depth and the targets in cooldown come from
 *   `delivery_targets` (one row per endpoint or destination; `undelivered`
 *   is kept by the enqueue statements and triggers, migrations 0401, 0600), the oldest undelivered delivery
 *   from the first entry of `deliveries_undelivered_age_idx` (migration 0540)
 *   for each kind: three index probes, whatever the queue holds;
 * - deactivated endpoints: a count over the partial index
 *   `notification_endpoints_deactivated_idx`, which holds only them;
 * - on a PostgreSQL server, the connections of `svc` processes by state from
 *   `pg_stat_activity` (a view of shared memory, bounded by
 *   `max_connections`). `@effect/sql-pg` keeps its pool to itself (no count
 *   of connections in use or of fibers waiting for one), so the server's
 *   view stands in: `active`, `waiting` (on a lock), `idle_in_transaction`,
 *   `idle`.
 *
 * A read that fails or takes over 2 seconds leaves the previous values and
 * is logged; the scrape still answers.
 */
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Effect, Layer, Schema, Semaphore } from "effect"
import { DatabaseInfo } from "../database/Database.ts"
import { rowsOf } from "../platform/Rows.ts"
import { DELIVERY_KINDS, Metrics } from "./Metrics.ts"

/** Shortest interval between two reads of the database gauges. */
export const DATABASE_READ_EVERY_MS = 5_000
const DATABASE_READ_TIMEOUT = "2 seconds"

/** Connections per process: `Database.server` opens at most 10, the embedded database has one. */
const POOL_MAX = { server: 10, embedded: 1, memory: 1 } as const

const CONNECTION_STATES = ["active", "waiting", "idle_in_transaction", "idle"] as const

const QueueRows = rowsOf(
  "delivery_targets",
  Schema.Struct({
    kind: Schema.String,
    depth: Schema.Number,
    cooling: Schema.Number,
    oldest_age: Schema.NullOr(Schema.Number)
  })
)
const DeactivatedRows = rowsOf("notification_endpoints", Schema.Struct({ n: Schema.Number }))
const ConnectionRows = rowsOf("pg_stat_activity", Schema.Struct({ state: Schema.String, n: Schema.Number }))

export interface Scraped {
  readonly contentType: string
  readonly body: string
}

export class MetricsScrape extends Context.Service<MetricsScrape, {
  /** Reads the database gauges (unless read recently) and renders every metric. */
  readonly scrape: Effect.Effect<Scraped>
}>()("svc/observability/MetricsScrape") {
  static readonly layer = Layer.effect(
    MetricsScrape,
    Effect.gen(function*() {
      const metrics = yield* Metrics
      const sql = yield* PgClient.PgClient
      const info = yield* DatabaseInfo
      const { gauges } = metrics
      gauges.poolMax.set(POOL_MAX[info.kind])

      const readQueues = Effect.gen(function*() {
        const rows = yield* QueueRows.all(sql`
          WITH targets AS (
            SELECT kind, sum(undelivered)::int AS depth,
                   (count(*) FILTER (WHERE cooldown_until > now()))::int AS cooling
            FROM delivery_targets GROUP BY kind
          )
          SELECT k.kind, coalesce(t.depth, 0) AS depth, coalesce(t.cooling, 0) AS cooling,
                 extract(epoch FROM now() - least(
                   (SELECT d.created_at FROM deliveries d
                    WHERE d.kind = k.kind AND d.status IN ('queued', 'sending', 'retrying')
                    ORDER BY d.created_at LIMIT 1),
                   -- The log: the first row past each waiting target's cursor.
                   (SELECT min(f.created_at) FROM delivery_targets t
                    CROSS JOIN LATERAL (
                      SELECT d.created_at FROM deliveries d
                      WHERE d.target_id = t.id AND d.seq > t.cursor AND d.status = 'logged'
                      ORDER BY d.target_id, d.seq LIMIT 1
                    ) f
                    WHERE t.kind = k.kind AND t.log_listed AND t.log_pending > 0)
                 ))::float8 AS oldest_age
          FROM (VALUES ('webhook'), ('telemetry'), ('email')) AS k (kind)
          LEFT JOIN targets t ON t.kind = k.kind
        `)
        for (const kind of DELIVERY_KINDS) {
          const row = rows.find((r) => r.kind === kind)
          gauges.queueDepth.set({ kind }, row?.depth ?? 0)
          gauges.targetsCoolingDown.set({ kind }, row?.cooling ?? 0)
          gauges.queueOldestAge.set({ kind }, Math.max(0, row?.oldest_age ?? 0))
        }
        const [deactivated] = yield* DeactivatedRows.all(sql`
          SELECT count(*)::int AS n FROM notification_endpoints WHERE NOT active
        `)
        gauges.endpointsDeactivated.set(deactivated?.n ?? 0)
      })

      const readConnections = Effect.gen(function*() {
        const rows = yield* ConnectionRows.all(sql`
          SELECT CASE
                   WHEN state = 'active' AND wait_event_type = 'Lock' THEN 'waiting'
                   WHEN state = 'active' THEN 'active'
                   WHEN state LIKE 'idle in transaction%' THEN 'idle_in_transaction'
                   ELSE 'idle'
                 END AS state,
                 count(*)::int AS n
          FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'svc' AND pid <> pg_backend_pid()
          GROUP BY 1
        `)
        for (const state of CONNECTION_STATES) {
          gauges.connections.set({ state }, rows.find((row) => row.state === state)?.n ?? 0)
        }
      })

      const read = Effect.andThen(readQueues, info.kind === "server" ? readConnections : Effect.void).pipe(
        Effect.timeout(DATABASE_READ_TIMEOUT),
        Effect.catchCause((cause) =>
          Effect.logWarning("metrics: reading the database gauges failed; keeping the previous values", cause)
        ),
        // Scrapes are not work worth tracing.
        Effect.withTracerEnabled(false)
      )

      // Single flight: a scrape that finds a read under way waits for it and
      // then finds the values fresh.
      const permit = yield* Semaphore.make(1)
      let readAt = Number.NEGATIVE_INFINITY
      const refresh = permit.withPermit(Effect.flatMap(Clock.currentTimeMillis, (now) => {
        if (now - readAt < DATABASE_READ_EVERY_MS) return Effect.void
        return Effect.andThen(
          read,
          Effect.flatMap(Clock.currentTimeMillis, (readNow) =>
            Effect.sync(() => {
              readAt = readNow
            }))
        )
      }))

      const scrape = Effect.gen(function*() {
        yield* refresh
        const body = yield* Effect.promise(() => metrics.registry.metrics())
        return { contentType: metrics.registry.contentType, body }
      })

      return MetricsScrape.of({ scrape })
    })
  )
}
