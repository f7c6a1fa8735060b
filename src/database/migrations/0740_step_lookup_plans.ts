import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * A governed step finds its `step_id` through `agent_steps`' primary key
 * whatever the planner's statistics say. Without statistics (a fresh
 * database: on the embedded one nothing analyzes a table until
 * `EmbeddedStatistics.ts`' first round, a minute after the start) the
 * look-up `session_id = $1 AND step_id = $2` cost the same by
 * `(session_id, step_id)` as by `agent_steps_session_seq_idx (session_id,
 * seq)`, and the generic plan of a prepared statement took the latter:
 * every earlier step of the session read and filtered, on every step, for
 * the life of that plan (an allowed step's statement cost PGlite's thread
 * 340 µs over the first 1 000 steps of 16 sessions and 640 to 820 after
 * 8 000 to 10 000 in one process, load 19 to 23; with this index 240 to
 * 330 throughout: `bench/notes/steps.md`).
 *
 * The index of a session's steps in order becomes partial on
 * `seq IS NOT NULL` (every row: `seq` is an identity): the pages and the
 * cursor's `seq > $n` and `seq < $n` imply its predicate and use it as
 * before, while an equality on the session alone no longer may, so the
 * step look-ups keep to the primary key. Building it holds off writes to
 * `agent_steps` for as long as the build takes (as any `CREATE INDEX`; a
 * second per million steps: 0.85 s for a million rows on the server of
 * bench/notes/runs.md at load 18).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX IF NOT EXISTS agent_steps_session_seq_ordered_idx ON agent_steps (session_id, seq) WHERE seq IS NOT NULL`
  yield* sql`DROP INDEX IF EXISTS agent_steps_session_seq_idx`
  yield* sql`ALTER INDEX agent_steps_session_seq_ordered_idx RENAME TO agent_steps_session_seq_idx`
})
