/** Helpers for approval tests: the outbox rows of an approval, read straight from the database. */
import { Effect } from "effect"
import type { SqlClient } from "effect/sql"

export interface OutboxRow {
  readonly id: string
  readonly type: string
  readonly org_id: string
  readonly occurred_at: Date
  readonly body: string
  readonly json: any
}

/** Every outbox event of `approvalId`, in the order written. */
export const outboxOf = (sql: SqlClient.SqlClient, approvalId: string) =>
  sql<{ id: string; type: string; org_id: string; occurred_at: Date; body: string }>`
    SELECT id, type, org_id, occurred_at, body FROM events
    WHERE (body::jsonb -> 'approval' ->> 'approval_id') = ${approvalId}
    ORDER BY seq
  `.pipe(
    Effect.orDie,
    Effect.map((rows) => rows.map((row): OutboxRow => ({ ...row, json: JSON.parse(row.body) })))
  )

/** Every outbox event of an organization, in the order written. */
export const outboxOfOrg = (sql: SqlClient.SqlClient, orgId: string) =>
  sql<{ type: string; body: string }>`SELECT type, body FROM events WHERE org_id = ${orgId} ORDER BY seq`.pipe(
    Effect.orDie
  )
