/**
 * An organization's approval policies, one per action class: stored, listed,
 * and read through the process's cache (`PolicyCache.ts`), which forgets an
 * organization's rules when they change here or, on a server, in another
 * process.
 */
import { Effect, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { ArgumentsSchema } from "../api/ApprovalEdits.ts"
import {
  type AnswerSchemaTooComplex,
  InvalidRequest,
  PolicyRulesTooComplex,
  type ValidationBusy
} from "../api/Errors.ts"
import {
  type DryRunAnswer,
  type DryRunInput,
  Policy,
  type PolicyInput,
  PolicyRule,
  TimeoutAction
} from "../api/Policies.ts"
import type { Broadcast, Wakeups } from "../database/Wakeups.ts"
import type { SvcConfigShape } from "../platform/Config.ts"
import { claimRate, refuseAtCap } from "../platform/OrgLimits.ts"
import { BigIntText, JsonColumn, rowsOf, Timestamp } from "../platform/Rows.ts"
import { DEFAULT_POLICY } from "./Deadlines.ts"
import { type CachedRule, makePolicyCache } from "./PolicyCache.ts"
import { checkGroups } from "./Reviewers.ts"
import { type CompiledRule, compileRules, resolve, type RuleLimits, type RuleProblem } from "./Rules.ts"
import { rulesBusy, type RuleWorkers } from "./RuleWorkers.ts"

/** The `Wakeups` signal that an organization's approval policies changed. */
const policiesSignal = (orgId: string): Broadcast => `policies:${orgId}`

const policyColumns = {
  action_class: Schema.String,
  mode: Policy.fields.mode,
  review_seconds: Schema.Number,
  expiring_notice_seconds: Schema.Number,
  escalation_seconds: Schema.NullOr(Schema.Number),
  timeout_action: TimeoutAction,
  rules: JsonColumn(Schema.Array(PolicyRule)),
  quorum: Schema.Number,
  reviewer_group: Schema.NullOr(Schema.String),
  escalation_chain: Schema.NullOr(Schema.Array(Schema.String)),
  arguments_schema: Schema.NullOr(JsonColumn(ArgumentsSchema)),
  updated_at: Timestamp
}
const PolicyRows = rowsOf("approval_policies", Schema.Struct(policyColumns))
type PolicyRow = NonNullable<Effect.Success<ReturnType<typeof PolicyRows.one>>>

/** A policy as the cache reads it: with its `version`, which the step's statement checks is still stored. */
const VersionedPolicyRows = rowsOf("approval_policies", Schema.Struct({ ...policyColumns, version: BigIntText }))

const POLICY_COLUMNS =
  "action_class, mode, review_seconds, expiring_notice_seconds, escalation_seconds, timeout_action, rules, quorum, reviewer_group, escalation_chain, arguments_schema, updated_at"

/** A policy row's `group` and `escalation_chain`, when set. */
const assignmentOf = (row: Pick<PolicyRow, "reviewer_group" | "escalation_chain">) => ({
  ...(row.reviewer_group === null ? {} : { group: row.reviewer_group }),
  ...(row.escalation_chain === null ? {} : { escalation_chain: row.escalation_chain })
})

const toPolicy = (row: PolicyRow): Policy => ({
  action_class: row.action_class,
  mode: row.mode,
  review_seconds: row.review_seconds,
  expiring_notice_seconds: row.expiring_notice_seconds,
  ...(row.escalation_seconds === null ? {} : { escalation_seconds: row.escalation_seconds }),
  timeout_action: row.timeout_action,
  rules: row.rules,
  ...(row.quorum > 1 ? { quorum: row.quorum } : {}),
  ...assignmentOf(row),
  ...(row.arguments_schema === null ? {} : { arguments_schema: row.arguments_schema }),
  updated_at: row.updated_at
})

export const makePolicies = Effect.fnUntraced(function*(
  sql: SqlClient.SqlClient,
  config: SvcConfigShape,
  wakeups: Wakeups["Service"],
  /** Checks a policy's `arguments_schema` (`Edits.ts`). */
  checkArgumentsSchema: (
    orgId: string,
    actionClass: string,
    schema: ArgumentsSchema | undefined
  ) => Effect.Effect<void, InvalidRequest | AnswerSchemaTooComplex | ValidationBusy>,
  ruleWorkers: RuleWorkers["Service"]
) {
  const limits: RuleLimits = config.approvalRules
  const dryRuns = {
    name: "dry_run",
    perMinute: config.approvalRules.dryRunsPerMinute,
    limit: "SVC_APPROVAL_DRY_RUNS_PER_MINUTE",
    what: "policy dry runs"
  }
  /** The 400 naming the rule (and the limit) at fault. */
  const refusal = (problem: RuleProblem) =>
    problem.limit === undefined
      ? new InvalidRequest({ field: problem.field, detail: problem.detail })
      : new PolicyRulesTooComplex({
        field: problem.field,
        limit: problem.limit.name,
        limit_value: problem.limit.value,
        detail: problem.detail
      })
  /** Compiles a policy's rules here (a dry run evaluates them), or the 400 naming the rule at fault. */
  const checkRules = (rules: ReadonlyArray<PolicyRule>) => {
    const compiled = compileRules(rules, limits)
    // The notice of a rule's own deadlines is checked by its schema (`RequireApprovalResult`).
    return compiled.ok ? Effect.succeed(compiled.rules) : Effect.fail(refusal(compiled.problem))
  }
  /**
   * Checks a policy's rules in a rule worker, as they are stored: compiling
   * fifty rules at the limits holds a thread tens of milliseconds, and a
   * stored policy's programs are compiled again when a step reads it.
   */
  const checkStored = (orgId: string, rules: ReadonlyArray<PolicyRule>) =>
    rules.length === 0 ? Effect.void : ruleWorkers.check(orgId, rules).pipe(
      Effect.catchTags({
        OverBudget: (over) =>
          Effect.fail(
            new PolicyRulesTooComplex({
              field: "rules",
              limit: over.limit,
              limit_value: over.value,
              detail: `${over.message} (${over.limit}).`
            })
          ),
        RuleWorkersBusy: (busy) => Effect.fail(rulesBusy(busy))
      }),
      Effect.flatMap((problem) => problem === null ? Effect.void : Effect.fail(refusal(problem)))
    )
  const putPolicy = Effect.fnUntraced(function*(orgId: string, actionClass: string, input: PolicyInput) {
    const escalation = input.escalation_seconds ?? null
    yield* checkStored(orgId, input.rules ?? [])
    yield* checkArgumentsSchema(orgId, actionClass, input.arguments_schema)
    // Every policy is listed in one answer: the number of action classes
    // with a policy is capped (a new one only; changing one always works).
    const maxPolicies = config.maxApprovalPoliciesPerOrg
    const row = yield* sql.withTransaction(Effect.gen(function*() {
      // The groups it names, held (FOR SHARE) until the policy is stored: a
      // concurrent delete of one of them waits, then finds the policy.
      yield* checkGroups(sql, orgId, input)
      const [existing] = yield* sql`
        SELECT 1 FROM approval_policies WHERE org_id = ${orgId} AND action_class = ${actionClass}
      `
      if (existing === undefined) {
        yield* refuseAtCap(sql, orgId, "approval_policies", {
          value: maxPolicies,
          limit: "SVC_MAX_APPROVAL_POLICIES_PER_ORG",
          detail:
            `The organization already has policies for ${maxPolicies} action classes, the most allowed (SVC_MAX_APPROVAL_POLICIES_PER_ORG).`
        })
      }
      return yield* PolicyRows.returned(sql`
        INSERT INTO approval_policies (org_id, action_class, mode, review_seconds, expiring_notice_seconds, escalation_seconds, timeout_action, rules,
          quorum, reviewer_group, escalation_chain, arguments_schema)
        VALUES (${orgId}, ${actionClass}, ${input.mode}, ${input.review_seconds}, ${input.expiring_notice_seconds}, ${escalation}, ${input.timeout_action},
          ${JSON.stringify(input.rules ?? [])}::jsonb, ${input.quorum ?? 1}, ${input.group ?? null}, ${
        input.escalation_chain === undefined ? null : [...input.escalation_chain]
      }::text[],
          ${input.arguments_schema === undefined ? null : JSON.stringify(input.arguments_schema)}::jsonb)
        ON CONFLICT (org_id, action_class) DO UPDATE SET
          mode = EXCLUDED.mode, review_seconds = EXCLUDED.review_seconds,
          expiring_notice_seconds = EXCLUDED.expiring_notice_seconds,
          escalation_seconds = EXCLUDED.escalation_seconds, timeout_action = EXCLUDED.timeout_action,
          rules = EXCLUDED.rules, quorum = EXCLUDED.quorum,
          reviewer_group = EXCLUDED.reviewer_group, escalation_chain = EXCLUDED.escalation_chain, arguments_schema = EXCLUDED.arguments_schema, updated_at = now()
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
      VersionedPolicyRows.one(sql`
        SELECT ${
        sql.literal(POLICY_COLUMNS)
      }, version FROM approval_policies WHERE org_id = ${orgId} AND action_class = ${actionClass}
      `),
      (row): CachedRule =>
        row === undefined ? { rule: DEFAULT_POLICY, version: null, conditions: [] } : {
          // Stored rules compiled when stored; they compile again here unless
          // the limits were lowered since, and then none applies (the
          // class's settings decide) until the policy is stored again.
          conditions: (() => {
            const compiled = compileRules(row.rules, limits)
            return compiled.ok ? compiled.rules : []
          })(),
          rule: {
            mode: row.mode,
            review_seconds: row.review_seconds,
            expiring_notice_seconds: row.expiring_notice_seconds,
            escalation_seconds: row.escalation_seconds,
            timeout_action: row.timeout_action,
            ...(row.quorum > 1 ? { quorum: row.quorum } : {}),
            ...assignmentOf(row)
          },
          version: row.version
        }
    )
  const policies = makePolicyCache(loadRule)

  const NO_SESSION = "00000000-0000-0000-0000-000000000000"
  const dryRun = Effect.fnUntraced(function*(orgId: string, actionClass: string, input: DryRunInput) {
    // Each dry run may cost a rule worker its whole deadline: they are counted before anything is read.
    yield* claimRate(sql, orgId, dryRuns).pipe(Effect.catchTag("SqlError", Effect.die))
    const facts = {
      tool: input.tool,
      arguments: input.arguments,
      session: { id: input.session?.id ?? NO_SESSION }
    }
    let settings: CachedRule["rule"]
    let rules: ReadonlyArray<CompiledRule>
    let which: DryRunAnswer["policy"]
    if (input.policy !== undefined) {
      rules = yield* checkRules(input.policy.rules ?? [])
      yield* checkArgumentsSchema(orgId, actionClass, input.policy.arguments_schema)
      settings = { ...input.policy, escalation_seconds: input.policy.escalation_seconds ?? null }
      which = "given"
    } else {
      const cached = yield* loadRule(orgId, actionClass)
      rules = cached.conditions
      settings = cached.rule
      which = cached.version === null ? "default" : "stored"
    }
    // Over its budget, a dry run is refused naming the limit (a step would fall back to the class's settings).
    const verdict = yield* ruleWorkers.run(orgId, rules, facts).pipe(
      Effect.catchTags({
        OverBudget: (over) => {
          const index = over.rule ?? 0
          return Effect.fail(
            new PolicyRulesTooComplex({
              field: `rules[${index}].condition`,
              limit: over.limit,
              limit_value: over.value,
              detail: `Rule ${
                JSON.stringify(rules[index]?.name ?? "")
              }: ${over.message} (${over.limit}); a governed step would be decided by the class's settings.`
            })
          )
        },
        RuleWorkersBusy: (busy) => Effect.fail(rulesBusy(busy))
      })
    )
    const resolution = resolve(settings, verdict)
    const answer: DryRunAnswer = {
      decision: resolution.decision,
      rule: resolution.rule,
      ...(resolution.reason === undefined ? {} : { reason: resolution.reason }),
      ...(resolution.decision !== "pending" ? {} : {
        approval: {
          review_seconds: resolution.settings.review_seconds,
          expiring_notice_seconds: resolution.settings.expiring_notice_seconds,
          escalation_seconds: resolution.settings.escalation_seconds,
          timeout_action: resolution.settings.timeout_action,
          ...((resolution.settings.quorum ?? 1) > 1 ? { quorum: resolution.settings.quorum! } : {}),
          ...(resolution.settings.group === undefined ? {} : { group: resolution.settings.group }),
          ...(resolution.settings.escalation_chain === undefined
            ? {}
            : { escalation_chain: resolution.settings.escalation_chain })
        }
      }),
      ...(resolution.error === undefined ? {} : { error: resolution.error }),
      policy: which
    }
    return answer
  })
  // A policy changed here or (NOTIFY, on a server) in another process.
  yield* wakeups.subscribe("policies:", policies.invalidate, Effect.void)
  return { putPolicy, listPolicies, dryRun, ruleFor: policies.get, forgetRules: policies.invalidate }
})
