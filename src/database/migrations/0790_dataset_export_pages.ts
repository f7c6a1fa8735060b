import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The JSON Lines export (`GET /v1/datasets/:id/export`) cuts its pages by
 * bytes without building the text of rows it does not send.
 *
 * `dataset_examples.line_bytes`: the length in bytes of the example's
 * export line (`jsonb_build_object('input', input, 'answer', answer,
 * 'feedback_id', feedback_id)::text`), computed once as the row is written.
 * That text is `{"input": ` (10 bytes), the input's text, `, "answer": `
 * (12), the answer's text, `, "feedback_id": ` (17), `null` (4) or the
 * quoted id (38), and `}` (1); the export compares the two in its tests.
 * A page sums these over its candidate rows and builds the text of the rows
 * it returns only. Adding the column computes it for every stored example
 * (one pass over the table, as a promote of each would have).
 *
 * `datasets.export_claim_until`: the first export of a version measures it
 * (its SHA-256 and length, migration 0690); the export that set this, to a
 * time of the database's clock, measures, renewing it as it goes, while
 * concurrent first exports, in any process, wait for the stored values.
 * A claim past its time (its process stopped) is taken over.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE dataset_examples ADD COLUMN line_bytes integer GENERATED ALWAYS AS (
      octet_length(input::text) + octet_length(answer::text) + CASE WHEN feedback_id IS NULL THEN 44 ELSE 78 END
    ) STORED
  `
  yield* sql`ALTER TABLE datasets ADD COLUMN export_claim_until timestamptz`
})
