import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * `dataset_examples.line`: the example's JSON Lines export line, stored as
 * the row is written, so that an export page reads stored text instead of
 * building it (a 1.8 MB example's `jsonb_build_object(...)::text` is tens
 * to hundreds of milliseconds of the embedded database's one session, on
 * every export). The same bytes as `jsonb_build_object('input', input,
 * 'answer', answer, 'feedback_id', feedback_id)::text` (members in jsonb's
 * order, `input`, `answer`, `feedback_id`: shorter names first), from
 * immutable parts, as a generated column must be. Adding the column
 * computes it for every stored example (one pass over the table, as
 * migration 0790 did).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE dataset_examples ADD COLUMN line text GENERATED ALWAYS AS (
      '{"input": ' || input::text || ', "answer": ' || answer::text || ', "feedback_id": '
        || COALESCE('"' || feedback_id::text || '"', 'null') || '}'
    ) STORED
  `
})
