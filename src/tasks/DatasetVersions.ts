/**
 * The statement that stores a dataset version, for the task's first (empty)
 * version here and for each promotion (`feedback/Promotion.ts`): `tasks/`
 * writes `datasets`. A version is by reference (migration 0630): its
 * lineage's rows up to `example_count`.
 */
import type { SqlClient } from "effect/sql"

export const insertDatasetVersion = (sql: SqlClient.SqlClient, version: {
  readonly id: string
  readonly orgId: string
  readonly taskId: string
  readonly version: number
  readonly exampleCount: number
  readonly lineageId: string
}) =>
  sql`
    INSERT INTO datasets (id, org_id, task_id, version, example_count, lineage_id)
    VALUES (${version.id}, ${version.orgId}, ${version.taskId}, ${version.version}, ${version.exampleCount}, ${version.lineageId})
  `
