/**
 * An organization's approval policies, one per action class: stored, listed,
 * and read through the process's cache (`PolicyCache.ts`), which forgets an
 * organization's rules when they change here or, on a server, in another
 * process.
 */
import { Effect, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { Policy, type PolicyInput, TimeoutAction } from "../api/Approvals.ts"
import type { SvcConfigShape } from "../platform/Config.ts"
import { refuseAtCap } from "../platform/OrgLimits.ts"
import { rowsOf, Timestamp } from "../platform/Rows.ts"
import type { Broadcast, Wakeups } from "../platform/Wakeups.ts"
import { DEFAULT_POLICY } from "./Deadlines.ts"
import { type CachedRule, makePolicyCache } from "./PolicyCache.ts"

/** The `Wakeups` signal that an organization's approval policies changed. */
export const policiesSignal = (orgId: string): Broadcast => `policies:${orgId}`

const PolicyRows = rowsOf("approval_policies", Schema.Struct({
  action_class: Schema.String,
  mode: Policy.fields.mode,
  review_seconds: Schema.Number,
  expiring_notice_seconds: Schema.Number,
  escalation_seconds: Schema.NullOr(Schema.Number),
  timeout_action: TimeoutAction,
  updated_at: Timestamp
}))
type PolicyRow = NonNullable<Effect.Success<ReturnType<typeof PolicyRows.one>>>

const POLICY_COLUMNS = "action_class, mode, review_seconds, expiring_notice_seconds, escalation_seconds, timeout_action, updated_at"

const toPolicy = (row: PolicyRow): Policy => ({
  action_class: row.action_class,
  mode: row.mode,
  review_seconds: row.review_seconds,
  expiring_notice_seconds: row.expiring_notice_seconds,
  ...(row.escalation_seconds === null ? {} : { escalation_seconds: row.escalation_seconds }),
  timeout_action: row.timeout_action,
  updated_at: row.updated_at
})

export const makePolicies = Effect.fnUntraced(function*(sql: SqlClient.SqlClient, config: SvcConfigShape, wakeups: Wakeups["Service"]) {
  const putPolicy = Effect.fnUntraced(function*(orgId: string, actionClass: string, input: PolicyInput) {
    const escalation = input.escalation_seconds ?? null
    // Every policy is listed in one answer: the number of action classes
    // with a policy is capped (a new one only; changing one always works).
    const maxPolicies = config.maxApprovalPoliciesPerOrg
    const row = yield* sql.withTransaction(Effect.gen(function*() {
      const [existing] = yield* sql`
        SELECT 1 FROM approval_policies WHERE org_id = ${orgId} AND action_class = ${actionClass}
      `
      if (existing === undefined) {
        yield* refuseAtCap(sql, orgId, "approval_policies", {
          value: maxPolicies,
          limit: "SVC_MAX_APPROVAL_POLICIES_PER_ORG",
          detail: `The organization already has policies for ${maxPolicies} action classes, the most allowed (SVC_MAX_APPROVAL_POLICIES_PER_ORG).`
        })
      }
      return yield* PolicyRows.returned(sql`
        INSERT INTO approval_policies (org_id, action_class, mode, review_seconds, expiring_notice_seconds, escalation_seconds, timeout_action)
        VALUES (${orgId}, ${actionClass}, ${input.mode}, ${input.review_seconds}, ${input.expiring_notice_seconds}, ${escalation}, ${input.timeout_action})
        ON CONFLICT (org_id, action_class) DO UPDATE SET
          mode = EXCLUDED.mode, review_seconds = EXCLUDED.review_seconds,
          expiring_notice_seconds = EXCLUDED.expiring_notice_seconds,
          escalation_seconds = EXCLUDED.escalation_seconds, timeout_action = EXCLUDED.timeout_action,
          updated_at = now()
        RETURNING ${sql.literal(POLICY_COLUMNS)}
      `)
    })).pipe(Effect.catchTag("SqlError", Effect.die))
    yield* wakeups.signal(policiesSignal(orgId))
    return toPolicy(row)
  })

  const listPolicies = Effect.fnUntraced(function*(orgId: string) {
    const rows = yield* PolicyRows.all(sql`
      SELECT ${sql.literal(POLICY_COLUMNS)} FROM approval_policies WHERE org_id = ${orgId} ORDER BY action_class
    `)
    return rows.map(toPolicy)
  })

  const loadRule = (orgId: string, actionClass: string) =>
    Effect.map(
      PolicyRows.one(sql`
        SELECT ${sql.literal(POLICY_COLUMNS)} FROM approval_policies WHERE org_id = ${orgId} AND action_class = ${actionClass}
      `),
      (row): CachedRule =>
        row === undefined ? { rule: DEFAULT_POLICY, stored: false } : {
          rule: {
            mode: row.mode,
            review_seconds: row.review_seconds,
            expiring_notice_seconds: row.expiring_notice_seconds,
            escalation_seconds: row.escalation_seconds,
            timeout_action: row.timeout_action
          },
          stored: true
        }
    )
  const policies = makePolicyCache(loadRule)
  // A policy changed here or (NOTIFY, on a server) in another process.
  yield* wakeups.subscribe("policies:", policies.invalidate, Effect.void)
  return { putPolicy, listPolicies, ruleFor: policies.get, forgetRules: policies.invalidate }
})
