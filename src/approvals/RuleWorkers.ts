/**
 * The rule workers: where a tenant's rules on arguments and edits are
 * computed when their cost is not proved small (`InProcessRules.ts`), under
 * bounds enforced while they run (`../platform/WorkerPool.ts`):
 *
 * - a policy's rules for one step, all of them, within
 *   `SVC_APPROVAL_RULES_TIMEOUT` (the policy's total budget);
 * - a policy's rules checked when it is stored (parsed, type-checked,
 *   measured against the limits: `Rules.ts`) within
 *   `SVC_ANSWER_VALIDATION_TIMEOUT`, as an answer schema: fifty rules at
 *   the length and node limits held the event loop about 35 ms a write,
 *   and eight writes at a time another organization's p95 past its bound;
 * - an edit's changed pointers and digest within
 *   `SVC_ANSWER_VALIDATION_TIMEOUT`, as its schema check;
 * - a decision's response scrubbed of recognizable secrets within
 *   `SVC_SCRUB_TIMEOUT`, as a correction's: on the event loop, one of
 *   65 536 characters packed with secret-shaped text held it 15-50 ms
 *   (`../feedback/Scrubber.ts`), eight of them another organization's
 *   p95 past its bound;
 * - each worker is a child process (`../platform/ProcessWorker.ts`) whose
 *   heap is `SVC_APPROVAL_RULES_HEAP_MB`: whatever a rule builds (`split`,
 *   `map`, `cel.bind`, strings) stays inside it. A thread would not do:
 *   Node enforces a thread's heap limit only between steps of JavaScript,
 *   and one native step that allocates past it (a `split` of sixty-four
 *   million characters, then a `map` over the items) aborted the whole
 *   server at 64 and 256 MB, or held it for seconds while the thread could
 *   not be terminated. A child past its deadline is killed (`SIGKILL`,
 *   which no native step delays); one past its heap ends by itself.
 *
 * A worker past its deadline or heap is replaced; the request fails with
 * `OverBudget` naming the setting (and the rule that was running, which the
 * child reports as it starts each rule). Admission is the pool's fair share
 * of `SVC_APPROVAL_RULES_QUEUE`, and an organization whose computations are
 * slow holds at most all workers but one. The workers start with a server
 * (`SVC_WARM_START`), else when first needed; each process has its own.
 */
import { Clock, Context, Data, Effect, Layer } from "effect"
import { ValidationBusy } from "../api/Errors.ts"
import type { PolicyRule } from "../api/Policies.ts"
import type { Json as Document } from "../feedback/Scrubber.ts"
import { SvcConfig } from "../platform/Config.ts"
import { siblingModule } from "../platform/ModuleUrl.ts"
import { admitted } from "../platform/PoolFairness.ts"
import { startProcessWorker } from "../platform/ProcessWorker.ts"
import { makeWorkerPool, type Outcome, runInPool } from "../platform/WorkerPool.ts"
import { runsInProcess } from "./InProcessRules.ts"
import type { RuleWorkerReply, RuleWorkerRequest } from "./rule-worker.ts"
import {
  type CompiledRule,
  evaluate as evaluateHere,
  type RuleLimits,
  type RuleProblem,
  type RuleVerdict,
  type StepFacts,
  verdictOf
} from "./Rules.ts"

type Request = RuleWorkerRequest extends infer R ? R extends { readonly id: number } ? Omit<R, "id"> : never : never
type Json = Extract<RuleWorkerRequest, { op: "edit" }>["after"]

const WORKER_URL = siblingModule("./rule-worker.ts", import.meta.url)

/** The phases of the pool's requests: each has its own deadline. */
const RULES = 0
const EDIT = 1
const SCRUB = 2
const CHECK = 3

/**
 * A computation went over its time or memory budget: `limit` names the
 * setting; `rule` the index of the rule that was running.
 */
export class OverBudget extends Data.TaggedError("OverBudget")<{
  readonly limit: string
  readonly value: number
  readonly message: string
  readonly rule?: number
}> {}

/** The rule workers' queue is full and this organization holds at least its share of it. */
export class RuleWorkersBusy extends Data.TaggedError("RuleWorkersBusy")<{
  readonly limit: string
  readonly value: number
}> {}

export class RuleWorkers extends Context.Service<RuleWorkers, {
  /**
   * The verdict of a policy's compiled rules for the step: here when their
   * cost is proved small (`InProcessRules.ts`), else in a worker, all the
   * rules within one deadline.
   */
  readonly run: (
    orgId: string,
    rules: ReadonlyArray<CompiledRule>,
    facts: StepFacts
  ) => Effect.Effect<RuleVerdict, OverBudget | RuleWorkersBusy>
  /** Whether `run` would need a worker for these rules and arguments (the step looks for a replay first). */
  readonly needsWorker: (rules: ReadonlyArray<CompiledRule>, args: unknown) => boolean
  /** What `after` changed of `before` (bounded, `ArgumentsDiff.ts`) and its digest. */
  readonly edit: (
    orgId: string,
    before: Json,
    after: Json
  ) => Effect.Effect<{ readonly changed: ReadonlyArray<string>; readonly digest: string }, OverBudget | RuleWorkersBusy>
  /** The first problem of a policy's rules (`compileRules`), or nothing: they may be stored. */
  readonly check: (
    orgId: string,
    rules: ReadonlyArray<PolicyRule>
  ) => Effect.Effect<RuleProblem | null, OverBudget | RuleWorkersBusy>
  /** `response` with every recognizable secret replaced by `[REDACTED]` (`Reasons.ts`). */
  readonly scrub: (orgId: string, response: Document) => Effect.Effect<Document, OverBudget | RuleWorkersBusy>
  /** Workers terminated and replaced so far (over budget, out of memory). */
  readonly replacedWorkers: () => number
  /** Starts every worker not started and waits until each is ready (a server does with `warmStart`). */
  readonly warm: Effect.Effect<void>
}>()("svc/approvals/RuleWorkers") {
  static readonly layer = Layer.effect(
    RuleWorkers,
    Effect.gen(function*() {
      const config = yield* SvcConfig
      const settings = config.approvalRules
      const clock = yield* Clock.Clock
      const pool = yield* Effect.acquireRelease(
        Effect.sync(() =>
          makeWorkerPool<Request, RuleWorkerReply>(WORKER_URL, {}, {
            clock,
            workers: settings.workers,
            timeoutMs: settings.timeoutMs,
            phaseTimeoutsMs: [
              settings.timeoutMs,
              config.answerValidationTimeoutMs,
              config.scrubTimeoutMs,
              config.answerValidationTimeoutMs
            ],
            heapMb: settings.heapMb,
            queueCapacity: settings.queue,
            start: (script) => startProcessWorker(script, { heapMb: settings.heapMb })
          })
        ),
        (pool) => Effect.sync(pool.close)
      )
      const warm = Effect.promise(pool.warm)
      // Started with the server, as the validation workers: the first step whose rules need one does not wait for it.
      if (config.warmStart) yield* warm

      const run = <A>(
        orgId: string,
        request: Request,
        phase: number,
        answer: (outcome: Outcome<RuleWorkerReply>) => Effect.Effect<A, OverBudget>
      ) =>
        admitted(pool, orgId, Effect.flatMap(runInPool(pool, orgId, request, phase), answer)).pipe(
          Effect.catchTag("PoolQueueFull", () =>
            Effect.fail(new RuleWorkersBusy({ limit: "SVC_APPROVAL_RULES_QUEUE", value: settings.queue })))
        )

      const overBudget = (
        outcome: Exclude<Outcome<RuleWorkerReply>, { _tag: "Reply" }>,
        what: string,
        timeout: { limit: string; value: number },
        rule?: number
      ) =>
        new OverBudget({
          ...(outcome._tag === "Crashed" && outcome.outOfMemory
            ? {
              limit: "SVC_APPROVAL_RULES_HEAP_MB",
              value: settings.heapMb,
              message: `${what} needed more than ${settings.heapMb} MB`
            }
            : outcome._tag === "Crashed"
            ? { limit: timeout.limit, value: timeout.value, message: `${what} ended its worker` }
            : { ...timeout, message: `${what} took longer than ${timeout.value} ms` }),
          ...(rule === undefined ? {} : { rule })
        })

      const needsWorker = (rules: ReadonlyArray<CompiledRule>, args: unknown) =>
        rules.length > 0 && !runsInProcess(rules, args)

      // Untraced (no span, no stack capture): it runs on every step with rules.
      const runRules = Effect.fnUntraced(
        function*(orgId: string, rules: ReadonlyArray<CompiledRule>, facts: StepFacts) {
          if (rules.length === 0) return { rule: null } satisfies RuleVerdict
          if (!needsWorker(rules, facts.arguments)) {
            return verdictOf(rules, evaluateHere(rules.map((rule) => rule.program), facts))
          }
          // Written by the pool from the child's reports (`ProcessWorker.ts`).
          const progress = new Int32Array(1)
          const conditions = rules.map((rule) => rule.condition)
          const { maxNodes, maxDepth } = settings
          const request: Request = { op: "rules", conditions, maxNodes, maxDepth, facts, progress }
          return yield* run(
            orgId,
            request,
            RULES,
            (outcome) =>
              outcome._tag === "Reply" && outcome.reply._tag === "Evaluated"
                ? Effect.succeed(verdictOf(rules, outcome.reply.evaluation))
                : outcome._tag === "Reply"
                ? Effect.die(new Error(`a rule worker answered ${outcome.reply._tag} to rules`))
                : Effect.fail(overBudget(
                  outcome,
                  "evaluating the policy's rules",
                  { limit: "SVC_APPROVAL_RULES_TIMEOUT", value: settings.timeoutMs },
                  Atomics.load(progress, 0)
                ))
          )
        }
      )

      const edit = Effect.fn("RuleWorkers.edit")(function*(orgId: string, before: Json, after: Json) {
        return yield* run(
          orgId,
          { op: "edit", before, after },
          EDIT,
          (outcome) =>
            outcome._tag === "Reply" && outcome.reply._tag === "Edited"
              ? Effect.succeed({ changed: outcome.reply.changed, digest: outcome.reply.digest })
              : outcome._tag === "Reply"
              ? Effect.die(new Error(`a rule worker answered ${outcome.reply._tag} to an edit`))
              : Effect.fail(overBudget(outcome, "comparing the edited arguments with the step's", {
                limit: "SVC_ANSWER_VALIDATION_TIMEOUT",
                value: config.answerValidationTimeoutMs
              }))
        )
      })

      const scrub = Effect.fn("RuleWorkers.scrub")(function*(orgId: string, document: Document) {
        return yield* run(
          orgId,
          { op: "scrub", document },
          SCRUB,
          (outcome) =>
            outcome._tag === "Reply" && outcome.reply._tag === "Scrubbed"
              ? Effect.succeed(outcome.reply.document)
              : outcome._tag === "Reply"
              ? Effect.die(new Error(`a rule worker answered ${outcome.reply._tag} to a scrub`))
              : Effect.fail(overBudget(outcome, "removing secrets from the response", {
                limit: "SVC_SCRUB_TIMEOUT",
                value: config.scrubTimeoutMs
              }))
        )
      })

      const { maxRules, maxLength, maxNodes, maxDepth } = settings
      const limits: RuleLimits = { maxRules, maxLength, maxNodes, maxDepth }
      const check = Effect.fn("RuleWorkers.check")(function*(orgId: string, rules: ReadonlyArray<PolicyRule>) {
        return yield* run(
          orgId,
          { op: "check", rules, limits },
          CHECK,
          (outcome) =>
            outcome._tag === "Reply" && outcome.reply._tag === "Checked"
              ? Effect.succeed(outcome.reply.problem)
              : outcome._tag === "Reply"
              ? Effect.die(new Error(`a rule worker answered ${outcome.reply._tag} to a check`))
              : Effect.fail(overBudget(outcome, "checking the policy's rules", {
                limit: "SVC_ANSWER_VALIDATION_TIMEOUT",
                value: config.answerValidationTimeoutMs
              }))
        )
      })

      return RuleWorkers.of({
        run: runRules,
        needsWorker,
        edit,
        scrub,
        check,
        replacedWorkers: pool.replacedWorkers,
        warm
      })
    })
  )
}

/**
 * For a step: a budget overrun is the failure of the rule that was running,
 * and the class's settings decide (as any evaluation error).
 */
export const failedRule = (rules: ReadonlyArray<Pick<CompiledRule, "name">>, over: OverBudget): RuleVerdict => ({
  rule: null,
  error: { rule: rules[over.rule ?? 0]?.name ?? rules[0]!.name, message: `${over.message} (${over.limit})` }
})

/** The `429 VALIDATION_BUSY` of a full rule-worker queue (send it with `Retry-After`). */
export const rulesBusy = (busy: RuleWorkersBusy) =>
  new ValidationBusy({
    limit: busy.limit,
    limit_value: busy.value,
    detail: `The rule workers hold ${busy.value} computations (${busy.limit}) and this organization holds at least ` +
      "its share of them; retry after 1 second."
  })
