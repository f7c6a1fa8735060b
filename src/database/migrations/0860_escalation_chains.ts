import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * An approval's escalation chain of up to five reviewer groups, replacing
 * the one `escalation_group` of migration 0830:
 *
 * - `approval_policies.escalation_chain` and, in a rule's JSON,
 *   `result.escalation_chain`: the groups each deadline hands the approval
 *   to, in order (null or absent: none);
 * - `approvals.escalation_chain`: the chain the approval was requested
 *   with. `escalation_level` counts the groups it has been handed along
 *   (the firing takes the chain's entry at that index next), and
 *   `escalated` stays "no escalation remains".
 *
 * An `escalation_group` becomes a chain of one, so a policy or an approval
 * escalates as it did; then the old columns go.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE approval_policies ADD COLUMN IF NOT EXISTS escalation_chain text[]`
  yield* sql`ALTER TABLE approvals ADD COLUMN IF NOT EXISTS escalation_chain text[]`
  yield* sql`
    UPDATE approval_policies SET escalation_chain = ARRAY[escalation_group]
    WHERE escalation_group IS NOT NULL
  `
  yield* sql`
    UPDATE approvals SET escalation_chain = ARRAY[escalation_group]
    WHERE escalation_group IS NOT NULL
  `
  // A rule's result: `escalation_group` becomes a one-group `escalation_chain`, the rules' order kept.
  yield* sql`
    UPDATE approval_policies p SET rules = (
      SELECT jsonb_agg(
        CASE WHEN jsonb_exists(r.rule->'result', 'escalation_group')
          THEN jsonb_set(r.rule, '{result}',
            ((r.rule->'result') - 'escalation_group'::text)
              || jsonb_build_object('escalation_chain', jsonb_build_array(r.rule->'result'->'escalation_group')))
          ELSE r.rule END
        ORDER BY r.i)
      FROM jsonb_array_elements(p.rules) WITH ORDINALITY AS r(rule, i)
    )
    WHERE EXISTS (SELECT 1 FROM jsonb_array_elements(p.rules) AS e(rule) WHERE jsonb_exists(e.rule->'result', 'escalation_group'))
  `
  yield* sql`ALTER TABLE approval_policies DROP COLUMN IF EXISTS escalation_group`
  yield* sql`ALTER TABLE approvals DROP COLUMN IF EXISTS escalation_group`
})
