import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Rules on arguments: a policy's ordered rules (`approval_policies.rules`,
 * the conditions as the tenant wrote them; compiled when read), and the rule
 * that decided a step and its approval (`agent_steps.rule`,
 * `approvals.rule`; NULL when the class's settings decided).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE approval_policies ADD COLUMN IF NOT EXISTS rules jsonb NOT NULL DEFAULT '[]'::jsonb`
  yield* sql`ALTER TABLE agent_steps ADD COLUMN IF NOT EXISTS rule text`
  yield* sql`ALTER TABLE agent_steps ADD COLUMN IF NOT EXISTS reason text`
  yield* sql`ALTER TABLE approvals ADD COLUMN IF NOT EXISTS rule text`
})
