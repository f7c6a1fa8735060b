/**
 * The tables of a server database sampled while a long run goes on: live
 * and dead row versions, autovacuum and autoanalyze runs so far, and the
 * database's size, once a minute. What a run whose tail grows minute by
 * minute shows beside its latencies (dead rows a scan must pass, vacuums
 * competing for the cores).
 *
 * Where the server's autovacuum is off (as on the CI machines), each
 * sample first runs `VACUUM (ANALYZE)` on the database, as autovacuum
 * (naptime 60 s) would have by then: without statistics the planner
 * estimates every table from its size alone, and a run measures plans no
 * production server keeps (`autovacuum` is on by default).
 */
import type { BenchDatabase } from "./db.ts"

export interface TableSample {
  /** Seconds since sampling started. */
  readonly at: number
  readonly live: number
  readonly dead: number
  readonly autovacuums: number
  readonly autoanalyzes: number
  readonly sizeMb: number
  /** The three tables with the most dead rows: `name dead/live`. */
  readonly top: ReadonlyArray<string>
  /** Seconds the `VACUUM (ANALYZE)` standing in for autovacuum took, when it ran. */
  readonly vacuumSeconds: number | undefined
}

interface Row {
  readonly relname: string
  readonly live: string
  readonly dead: string
  readonly autovacuums: string
  readonly autoanalyzes: string
  readonly size: string
}

/** Samples every `everyMs` until the answer's `stop` (which takes one last sample). Server databases only. */
export const sampleTables = async (database: BenchDatabase, everyMs = 60_000) => {
  const client = await database.connect()
  const started = performance.now()
  const samples: Array<TableSample> = []
  const [{ autovacuum }] =
    (await client.query<{ autovacuum: string }>("SELECT current_setting('autovacuum') AS autovacuum"))
      .rows as [{ autovacuum: string }]
  const standIn = autovacuum !== "on"
  const take = async (vacuum: boolean) => {
    const vacuumStarted = performance.now()
    if (vacuum) await client.query("VACUUM (ANALYZE)")
    const vacuumSeconds = vacuum ? Math.round(performance.now() - vacuumStarted) / 1000 : undefined
    const { rows } = await client.query<Row>(`
      SELECT relname, n_live_tup::text AS live, n_dead_tup::text AS dead,
             autovacuum_count::text AS autovacuums, autoanalyze_count::text AS autoanalyzes,
             pg_database_size(current_database())::text AS size
      FROM pg_stat_user_tables ORDER BY n_dead_tup DESC`)
    const sum = (f: (row: Row) => string) => rows.reduce((total, row) => total + Number(f(row)), 0)
    samples.push({
      at: Math.round((performance.now() - started) / 1000),
      live: sum((r) => r.live),
      dead: sum((r) => r.dead),
      autovacuums: sum((r) => r.autovacuums),
      autoanalyzes: sum((r) => r.autoanalyzes),
      sizeMb: Math.round(Number(rows[0]?.size ?? 0) / 1_048_576),
      top: rows.slice(0, 3).map((r) => `${r.relname} ${r.dead}/${r.live}`),
      vacuumSeconds
    })
  }
  let pending = Promise.resolve()
  const tick = () => take(standIn)
  const timer = setInterval(() => {
    pending = pending.then(tick, tick)
  }, everyMs)
  return {
    stop: async (): Promise<ReadonlyArray<TableSample>> => {
      clearInterval(timer)
      await pending.catch(() => {})
      await take(false).finally(() => client.end())
      return samples
    }
  }
}

/** One line of notes per sample. */
export const formatSamples = (label: string, samples: ReadonlyArray<TableSample>) =>
  samples.map((s) =>
    `${label}, ${s.at} s: dead rows ${s.dead} of ${s.live} live (${
      s.top.join(", ")
    }); autovacuum runs ${s.autovacuums}, autoanalyze ${s.autoanalyzes}; database ${s.sizeMb} MB${
      s.vacuumSeconds === undefined ? "" : `; autovacuum off: VACUUM (ANALYZE) first, ${s.vacuumSeconds} s`
    }`
  )
