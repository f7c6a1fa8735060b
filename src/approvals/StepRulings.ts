/**
 * The policy's answer to a governed step, decided here in one place: the
 * decision, the rule on arguments that decided it (none: the class's
 * settings), a rejecting rule's reason, the settings of the approval a
 * person must then decide, and the policy it was read from (its version,
 * which the step's statement checks). `agents/` records the step and asks.
 */
import { Effect } from "effect"
import type { GovernedStep, StepDecision } from "../api/Agents.ts"
import type { PolicyRule } from "./Deadlines.ts"
import type { CachedRule } from "./PolicyCache.ts"
import { resolve } from "./Rules.ts"
import { failedRule, rulesBusy, type RuleWorkers } from "./RuleWorkers.ts"

export interface StepRuling {
  readonly decision: StepDecision
  /** The rule on arguments that decided; null when the class's settings did. */
  readonly rule: string | null
  /** A rejecting rule's reason. */
  readonly reason: string | null
  /** The deadline settings of the approval a `pending` step opens: the deciding rule's, else the class's. */
  readonly settings: PolicyRule
  /** The policy the ruling was made from, as cached (`PolicyCache.ts`): the step's statement checks its version. */
  readonly policy: CachedRule
}

/** What answering a step found: a ruling, or (when its rules would take a rule worker) the step as it was sent before. */
export type StepAnswerOf<A> =
  | { readonly _tag: "Ruled"; readonly ruling: StepRuling }
  | { readonly _tag: "SentBefore"; readonly answer: A }

/**
 * Answers `step` from `policy`: rules on arguments (`Rules.ts`, compiled
 * when the policy was read) decide first, within their budget; without a
 * rule that holds, the class's settings. Rules that need a worker run for
 * a new step only: `sentBefore` (the step's row, if it was sent already)
 * is read first, and answers instead.
 */
export const answerStep = <A, E>(
  workers: RuleWorkers["Service"],
  orgId: string,
  sessionId: string,
  step: GovernedStep,
  policy: CachedRule,
  sentBefore: Effect.Effect<A | undefined, E>
) =>
  Effect.gen(function*() {
    if (workers.needsWorker(policy.conditions, step.arguments)) {
      const prior = yield* sentBefore
      if (prior !== undefined) return { _tag: "SentBefore", answer: prior } as StepAnswerOf<A>
    }
    const verdict = policy.conditions.length === 0 ? { rule: null } : yield* workers.run(orgId, policy.conditions, {
      tool: step.tool,
      arguments: step.arguments,
      session: { id: sessionId }
    }).pipe(
      Effect.catchTags({
        OverBudget: (over) => Effect.succeed(failedRule(policy.conditions, over)),
        RuleWorkersBusy: (busy) => Effect.fail(rulesBusy(busy))
      }),
      // A rule that could not be evaluated (or ran out of its budget) is named on the step's span.
      Effect.tap((verdict) =>
        verdict.rule === null && verdict.error !== undefined
          ? Effect.annotateCurrentSpan({
            "svc.rule_failed": verdict.error.rule,
            "svc.rule_error": verdict.error.message
          })
          : Effect.void
      )
    )
    const resolution = resolve(policy.rule, verdict)
    const ruling: StepRuling = {
      decision: resolution.decision,
      rule: resolution.rule,
      reason: resolution.reason ?? null,
      settings: resolution.settings,
      policy
    }
    return { _tag: "Ruled", ruling } as StepAnswerOf<A>
  })
