import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Dataset versions by reference (copy-on-write). Until now every version
 * held a full copy of its examples, so a promote copied the whole history.
 * Now the versions of a task form a line (`datasets.lineage_id`, the id of
 * the line's first version) and each example is stored once, in the line,
 * at its position: version V's examples are the line's examples at
 * positions below V's `example_count`. A promote appends its staged rows
 * and nothing else; `dataset_id` records the version that added a row.
 *
 * Existing data: a version whose examples begin with exactly its previous
 * version's examples (same input, answer and feedback id, position by
 * position; every version svc made does) joins its predecessor's line and
 * keeps only the rows it added. Any other version starts a line of its own
 * with all its rows (renumbered from 0 in their order, and `example_count`
 * set to the rows it really has), so nothing is lost even then. Before the
 * old table is dropped, every version is read both ways and compared: the
 * migration fails (and changes nothing) if one would read differently.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE dataset_examples RENAME TO dataset_examples_copies`
  yield* sql`ALTER INDEX dataset_examples_pkey RENAME TO dataset_examples_copies_pkey`
  yield* sql`ALTER TABLE datasets ADD COLUMN lineage_id uuid`

  // Per version: its rows as stored, and whether they are positions 0..n-1.
  yield* sql`
    CREATE TEMP TABLE dataset_shape ON COMMIT DROP AS
    SELECT d.id, d.task_id, d.version, d.example_count,
           count(e.position)::int AS n,
           (count(e.position) = 0 OR (min(e.position) = 0 AND max(e.position) = count(e.position) - 1)) AS dense
    FROM datasets d LEFT JOIN dataset_examples_copies e ON e.dataset_id = d.id
    GROUP BY d.id
  `
  // A version extends its predecessor when both are dense, it has at least
  // as many rows, and the predecessor's rows are its first rows exactly.
  yield* sql`
    CREATE TEMP TABLE dataset_extends ON COMMIT DROP AS
    SELECT d.id, p.n AS base_n
    FROM dataset_shape d
    JOIN dataset_shape p ON p.task_id = d.task_id AND p.version = d.version - 1
    WHERE d.dense AND p.dense AND d.n = d.example_count AND p.n = p.example_count AND d.n >= p.n
      AND NOT EXISTS (
        SELECT 1 FROM dataset_examples_copies pe
        LEFT JOIN dataset_examples_copies de ON de.dataset_id = d.id AND de.position = pe.position
        WHERE pe.dataset_id = p.id
          AND (de.dataset_id IS NULL OR de.input IS DISTINCT FROM pe.input
               OR de.answer IS DISTINCT FROM pe.answer OR de.feedback_id IS DISTINCT FROM pe.feedback_id)
      )
  `
  // A line starts at every version that does not extend its predecessor;
  // a version belongs to the nearest start at or below it.
  yield* sql`
    UPDATE datasets d SET lineage_id = l.lineage_id
    FROM (
      SELECT id, first_value(id) OVER (PARTITION BY task_id, line ORDER BY version) AS lineage_id
      FROM (
        SELECT s.id, s.task_id, s.version,
               count(*) FILTER (WHERE x.id IS NULL) OVER (PARTITION BY s.task_id ORDER BY s.version) AS line
        FROM dataset_shape s LEFT JOIN dataset_extends x ON x.id = s.id
      ) numbered
    ) l
    WHERE l.id = d.id
  `
  yield* sql`UPDATE datasets d SET example_count = s.n FROM dataset_shape s WHERE s.id = d.id AND d.example_count <> s.n`
  yield* sql`ALTER TABLE datasets ALTER COLUMN lineage_id SET NOT NULL`
  yield* sql`ALTER TABLE datasets ADD CONSTRAINT datasets_lineage_fkey FOREIGN KEY (lineage_id) REFERENCES datasets (id) ON DELETE CASCADE`
  yield* sql`
    CREATE TABLE dataset_examples (
      lineage_id uuid NOT NULL,
      position integer NOT NULL,
      dataset_id uuid NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
      input jsonb NOT NULL,
      answer jsonb NOT NULL,
      feedback_id uuid,
      PRIMARY KEY (lineage_id, position)
    )
  `
  // Rows a version added: all of them for the start of a line (renumbered in
  // their order), those past the predecessor's count for the others.
  yield* sql`
    INSERT INTO dataset_examples (lineage_id, position, dataset_id, input, answer, feedback_id)
    SELECT d.lineage_id,
           CASE WHEN x.id IS NULL THEN (row_number() OVER (PARTITION BY e.dataset_id ORDER BY e.position))::int - 1 ELSE e.position END,
           e.dataset_id, e.input, e.answer, e.feedback_id
    FROM dataset_examples_copies e
    JOIN datasets d ON d.id = e.dataset_id
    LEFT JOIN dataset_extends x ON x.id = e.dataset_id
    WHERE x.id IS NULL OR e.position >= x.base_n
  `
  // Every version reads as it did: the same examples in the same order.
  const differing = yield* sql<{ id: string }>`
    WITH old AS (
      SELECT e.dataset_id, (row_number() OVER (PARTITION BY e.dataset_id ORDER BY e.position))::int - 1 AS ord,
             e.input, e.answer, e.feedback_id
      FROM dataset_examples_copies e
    ), new AS (
      SELECT d.id AS dataset_id, e.position AS ord, e.input, e.answer, e.feedback_id
      FROM datasets d JOIN dataset_examples e ON e.lineage_id = d.lineage_id AND e.position < d.example_count
    )
    SELECT coalesce(o.dataset_id, n.dataset_id)::text AS id
    FROM old o FULL JOIN new n ON n.dataset_id = o.dataset_id AND n.ord = o.ord
    WHERE o.dataset_id IS NULL OR n.dataset_id IS NULL
       OR o.input IS DISTINCT FROM n.input OR o.answer IS DISTINCT FROM n.answer OR o.feedback_id IS DISTINCT FROM n.feedback_id
    LIMIT 1
  `
  if (differing.length > 0) {
    return yield* Effect.die(
      new Error(`dataset version ${differing[0]!.id} would not read as before; migration stopped, nothing changed`)
    )
  }
  yield* sql`DROP TABLE dataset_examples_copies`
  yield* sql`CREATE INDEX dataset_examples_dataset_idx ON dataset_examples (dataset_id)`
})
