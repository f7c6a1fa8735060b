import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Feedback on logged runs. `seq` gives the list its stable newest-first
 * keyset order. `correction` is the scrubbed correction (NULL for a bare
 * score, status `recorded`); `redacted_fields` the JSON paths the scrubber
 * changed (never the removed values). `promoted_dataset_id` is the dataset
 * version a promoted correction went into.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE feedback (
      id uuid PRIMARY KEY,
      seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      task_id uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
      inference_log_id text NOT NULL REFERENCES runs (trace_id) ON DELETE CASCADE,
      score smallint NOT NULL CHECK (score IN (-1, 0, 1)),
      correction jsonb,
      redacted_fields jsonb,
      status text NOT NULL CHECK (status IN ('recorded', 'pending', 'staged', 'rejected', 'promoted')),
      promoted_dataset_id uuid REFERENCES datasets (id),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CHECK ((correction IS NULL) = (status = 'recorded'))
    )
  `
  yield* sql`CREATE INDEX feedback_org_seq_idx ON feedback (org_id, seq DESC)`
  yield* sql`CREATE INDEX feedback_task_status_idx ON feedback (task_id, status, seq)`
})
