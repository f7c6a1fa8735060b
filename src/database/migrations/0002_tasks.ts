import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Tasks, logged runs and immutable dataset versions. `seq` columns give list
 * endpoints a stable newest-first order for keyset cursors.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE tasks (
      id uuid PRIMARY KEY,
      seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      name text NOT NULL,
      answer_schema jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )
  `
  yield* sql`CREATE INDEX tasks_org_seq_idx ON tasks (org_id, seq DESC)`
  yield* sql`
    CREATE TABLE runs (
      trace_id text PRIMARY KEY,
      seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      task_id uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
      input jsonb NOT NULL,
      answer jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )
  `
  yield* sql`CREATE INDEX runs_task_seq_idx ON runs (task_id, seq DESC)`
  yield* sql`
    CREATE TABLE datasets (
      id uuid PRIMARY KEY,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      task_id uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
      version integer NOT NULL,
      example_count integer NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (task_id, version)
    )
  `
  yield* sql`
    CREATE TABLE dataset_examples (
      dataset_id uuid NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
      position integer NOT NULL,
      input jsonb NOT NULL,
      answer jsonb NOT NULL,
      feedback_id uuid,
      PRIMARY KEY (dataset_id, position)
    )
  `
})
