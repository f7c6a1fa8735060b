/**
 * Checkpoints on the embedded database. PGlite is one PostgreSQL backend
 * without a checkpointer, and a backend of its own never asks for a
 * checkpoint when the WAL grows (only a server's backends do), so until
 * svc stops, the redo point stays where the process started: every write
 * since then stays in `pg_wal` (measured: 180 MB of WAL written, redo
 * point unmoved, 12 segment files), the data folder grows with it, and
 * recovery after a crash replays all of it. This asks for a checkpoint as
 * a server's `max_wal_size` and `checkpoint_timeout` would: once
 * `CHECKPOINT_WAL_BYTES` of WAL were written since the last one, or once
 * `CHECKPOINT_TIMEOUT` passed with some WAL written (instants are the
 * database's). A checkpoint writes the dirty pages of shared buffers
 * (at most `shared_buffers`, 128 MB) and holds the session meanwhile.
 */
import { Duration, Effect, Schema, type Scope } from "effect"
import type { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { rowsOf } from "../../platform/Rows.ts"
import { forkSupervised } from "../../platform/Supervised.ts"

/** WAL written since the last checkpoint that calls for the next one (a server's `max_wal_size` is 1 GB, spread over a cycle). */
const CHECKPOINT_WAL_BYTES = 256 * 1024 * 1024

/** Time since the last checkpoint that calls for the next one, when anything was written (a server's `checkpoint_timeout`). */
const CHECKPOINT_TIMEOUT = Duration.minutes(5)

/** How often the WAL written since the last checkpoint is looked at. */
const CHECKPOINT_CHECK_EVERY = Duration.seconds(10)

/** What a checkpoint record and its neighbours write: below this nothing was written since the last checkpoint. */
const IDLE_WAL_BYTES = 64 * 1024

export interface CheckpointBounds {
  readonly walBytes: number
  readonly timeout: Duration.Input
}

const defaults: CheckpointBounds = { walBytes: CHECKPOINT_WAL_BYTES, timeout: CHECKPOINT_TIMEOUT }

const DueRows = rowsOf("pg_control_checkpoint()", Schema.Struct({ due: Schema.Boolean }))

/** Runs `CHECKPOINT` when one of the bounds is passed; answers whether it did. */
export const checkpointIfDue = (
  sql: SqlClient.SqlClient,
  bounds: CheckpointBounds = defaults
): Effect.Effect<boolean, SqlError> =>
  Effect.gen(function*() {
    const timeoutMs = Duration.toMillis(Duration.fromInputUnsafe(bounds.timeout))
    const [row] = yield* DueRows.decoded(sql`
      SELECT (pg_current_wal_lsn() - redo_lsn) >= ${bounds.walBytes}
        OR ((pg_current_wal_lsn() - redo_lsn) > ${IDLE_WAL_BYTES}
          AND now() - checkpoint_time >= ${timeoutMs}::float8 * interval '1 millisecond') AS due
      FROM pg_control_checkpoint()
    `)
    if (row?.due !== true) return false
    yield* sql`CHECKPOINT`.unprepared
    return true
  })

/** The loop: every `every`, a checkpoint when one is due, for the life of the scope. */
export const keepCheckpoints = (
  sql: SqlClient.SqlClient,
  options: { readonly every?: Duration.Input; readonly bounds?: CheckpointBounds } = {}
): Effect.Effect<void, never, Scope.Scope> =>
  forkSupervised({
    name: "the embedded database's checkpoints",
    round: Effect.andThen(Effect.sleep(options.every ?? CHECKPOINT_CHECK_EVERY), checkpointIfDue(sql, options.bounds))
  })
