import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Approve with edits, or answer: a policy's JSON Schema of its tool's
 * arguments (`approval_policies.arguments_schema`, NULL when none is
 * declared); a decision's edited arguments, the JSON Pointers of what they
 * changed and their digest, or its response to the agent, on the approval
 * and on its step (`approved_arguments`, `arguments_changed`,
 * `arguments_digest`, `response`; NULL when the decision carried none).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE approval_policies ADD COLUMN IF NOT EXISTS arguments_schema jsonb`
  yield* sql`ALTER TABLE approvals ADD COLUMN IF NOT EXISTS approved_arguments jsonb`
  yield* sql`ALTER TABLE approvals ADD COLUMN IF NOT EXISTS arguments_digest text`
  yield* sql`ALTER TABLE approvals ADD COLUMN IF NOT EXISTS response jsonb`
  yield* sql`ALTER TABLE agent_steps ADD COLUMN IF NOT EXISTS approved_arguments jsonb`
  yield* sql`ALTER TABLE agent_steps ADD COLUMN IF NOT EXISTS arguments_digest text`
  yield* sql`ALTER TABLE agent_steps ADD COLUMN IF NOT EXISTS response jsonb`
  yield* sql`ALTER TABLE approvals ADD COLUMN IF NOT EXISTS arguments_changed jsonb`
})
