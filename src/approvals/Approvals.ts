/**
 * Approval policies (`Policies.ts`) and the approval lifecycle: request, a
 * person's decision, and the deadlines (expiring notice, escalation,
 * expiry: `Firing.ts`). Each transition writes its lifecycle event to the
 * outbox in the same transaction; a decision or an expiry also settles the
 * step and records a session event.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import type { GovernedStep } from "../api/Agents.ts"
import type { ArgumentsTooComplex } from "../api/ApprovalEdits.ts"
import type { ApprovalSnapshot } from "../api/Approvals.ts"
import {
  type AnswerSchemaTooComplex,
  type InvalidRequest,
  type LimitReached,
  NotFound,
  type PolicyRulesTooComplex,
  type RateLimited,
  type ValidationBusy
} from "../api/Errors.ts"
import type { DryRunAnswer, DryRunInput, Policy, PolicyInput } from "../api/Policies.ts"
import { type Topic, Topics, Wakeups } from "../database/Wakeups.ts"
import { Metrics } from "../observability/Metrics.ts"
import { SvcConfig } from "../platform/Config.ts"
import { makeOrgPermits } from "../platform/OrgPermits.ts"
import { Instant, InstantOrNull, rowsOf } from "../platform/Rows.ts"
import { hubSignal } from "../streams/SessionEvents.ts"
import { AnswerSchemas } from "../tasks/AnswerSchema.ts"
import { type DecisionInput, decisionOf, type DecisionRefused, makeDecide, writes } from "./Decide.ts"
import { hasEdit, makeEdits, NOTHING_SETTLED, settledValues } from "./Edits.ts"
import { snapshotOf } from "./Events.ts"
import {
  APPROVAL_COLUMNS,
  ApprovalRows,
  fireDeadline as fireDue,
  fireMostOverdue,
  type FullApprovalRow
} from "./Firing.ts"
import { approvalsTopic, type StreamEntry } from "./OrgStream.ts"
import { makePolicies } from "./Policies.ts"
import { scrubReason } from "./Reasons.ts"
import { RuleWorkers } from "./RuleWorkers.ts"
import { StepRecords } from "./StepRecords.ts"
import { answerStep, type StepAnswerOf } from "./StepRulings.ts"
import { transition } from "./Transition.ts"

const DueRows = rowsOf("approvals", Schema.Struct({ at: InstantOrNull, now: Instant }))

export class Approvals extends Context.Service<Approvals, {
  readonly putPolicy: (
    orgId: string,
    actionClass: string,
    input: PolicyInput
  ) => Effect.Effect<
    Policy,
    InvalidRequest | NotFound | LimitReached | PolicyRulesTooComplex | AnswerSchemaTooComplex | ValidationBusy
  >
  readonly listPolicies: (orgId: string) => Effect.Effect<ReadonlyArray<Policy>>
  /** Evaluates the stored (or a given) policy against a sample step; creates nothing. */
  readonly dryRun: (
    orgId: string,
    actionClass: string,
    input: DryRunInput
  ) => Effect.Effect<
    DryRunAnswer,
    InvalidRequest | PolicyRulesTooComplex | AnswerSchemaTooComplex | ValidationBusy | RateLimited
  >
  /**
   * The policy's answer to a governed step (`StepRulings.ts`), from the
   * organization's rule for its class or the default rule, as the process
   * caches it (`PolicyCache.ts`: the step's statement checks its version);
   * `sentBefore` (the step's
   * row, when it was sent already) is read first when answering would take
   * a rule worker, and answers instead.
   */
  readonly answerStep: <A, E>(
    orgId: string,
    sessionId: string,
    step: GovernedStep,
    sentBefore: Effect.Effect<A | undefined, E>
  ) => Effect.Effect<StepAnswerOf<A>, E | ValidationBusy>
  /** Forgets the organization's cached rules here (a statement found one out of date). */
  readonly forgetRules: (orgId: string) => Effect.Effect<void>
  readonly get: (orgId: string, approvalId: string) => Effect.Effect<ApprovalSnapshot, NotFound>
  /** Decides the approval: who decides, as records name them (an API key's id, `console:<person>` or `email:<reviewer address>`), and what (`Decide.ts`). */
  readonly decide: <E = never>(
    orgId: string,
    actor: string,
    approvalId: string,
    input: DecisionInput<E>
  ) => Effect.Effect<
    ApprovalSnapshot,
    DecisionRefused | ArgumentsTooComplex | ValidationBusy | E
  >
  /** Fires the most overdue deadline, if any is due; true when one fired. */
  readonly fireNextDue: Effect.Effect<boolean>
  /** The earliest deadline still to fire and the database's time now (epoch ms), for the scheduler's sleep. */
  readonly earliestDue: Effect.Effect<{ readonly at: number | null; readonly now: number }>
}>()("svc/approvals/Approvals") {
  static readonly layer = Layer.effect(
    Approvals,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const config = yield* SvcConfig
      const wakeups = yield* Wakeups
      const metrics = yield* Metrics
      const steps = yield* StepRecords

      const ruleWorkers = yield* RuleWorkers
      const edits = makeEdits(sql, yield* AnswerSchemas, ruleWorkers, config.answerValidationQueue)
      const policies = yield* makePolicies(sql, config, wakeups, edits.checkArgumentsSchema, ruleWorkers)
      /** Applies the due deadline of a claimed row (`Firing.ts`), inside the claiming transaction. */
      const fireDeadline = Effect.fn("Approvals.fireDeadline")((
        row: FullApprovalRow,
        now: number,
        log: Array<StreamEntry>
      ) => fireDue(sql, steps, row, now, log))

      /**
       * After a transition has committed: wake the workers of `topics` (the
       * outbox dispatcher, the deadline scheduler), and the streams that
       * show it (the session's, and the organization's approval stream).
       */
      const announce = (
        change: { readonly orgId: string; readonly sessionId: string | null; readonly topics: ReadonlyArray<Topic> }
      ) =>
        wakeups.signal(
          ...change.topics,
          hubSignal(approvalsTopic(change.orgId)),
          ...(change.sessionId === null ? [] : [hubSignal(change.sessionId)])
        )

      const get = Effect.fn("Approvals.get")(function*(orgId: string, approvalId: string) {
        const row = yield* ApprovalRows.one(sql`
          SELECT ${sql.literal(APPROVAL_COLUMNS)} FROM approvals WHERE id = ${approvalId} AND org_id = ${orgId}
        `)
        if (row === undefined) return yield* new NotFound({ detail: "No such approval." })
        return snapshotOf(row)
      })

      const decider = makeDecide(sql, steps, { fireDeadline })
      const editPermits = makeOrgPermits(1)

      const decide = Effect.fn("Approvals.decide")(
        function*<E = never>(orgId: string, actor: string, approvalId: string, input: DecisionInput<E>) {
          yield* Effect.annotateCurrentSpan({ "svc.approval_id": approvalId })
          const decision = decisionOf(input)
          // Before any work on edited arguments, what refuses the decider anyway (the transaction decides again, under the lock).
          if (decision.editsArguments) {
            const early = yield* Effect.orDie(Effect.gen(function*() {
              const { current, now, row } = yield* decider.read(orgId, actor, approvalId, input, false)
              const outcome = transition(current, actor, decision, now)
              return writes(outcome)
                ? undefined
                : yield* decider.apply(orgId, actor, input, row, outcome, NOTHING_SETTLED, null, now)
            }))
            if (early !== undefined) return yield* early.answer
          }
          // Edited arguments are checked against the class's schema before the row is locked.
          const settleAndWrite = Effect.gen(function*() {
            const settled = yield* edits.settle(orgId, approvalId, input.edit)
            if (settled === undefined) return yield* decider.refusal.missing()
            const reason = input.reason === undefined ? null : yield* scrubReason(input.reason)
            // Its JSON text, made before the transaction holds the database (`settledValues` keeps it).
            settledValues(settled)
            return yield* sql.withTransaction(Effect.gen(function*() {
              const { current, now, row } = yield* decider.read(orgId, actor, approvalId, input, true)
              return yield* decider.apply(
                orgId,
                actor,
                input,
                row,
                transition(current, actor, decision, now),
                settled,
                reason,
                now
              )
            })).pipe(Effect.orDie)
          })
          // A decision with edited arguments or a response waits for the organization's other such decisions:
          // one organization's large edits are checked (in the workers) and written (holding the database, the
          // embedded one's only session) one at a time, not all at once beside other organizations' requests.
          const after = yield* (hasEdit(input.edit) ? editPermits.withPermit(orgId, settleAndWrite) : settleAndWrite)
          if (after.wake !== undefined) yield* announce({ orgId, ...after.wake })
          return yield* after.answer
        }
      )

      const fireNextDue = Effect.gen(function*() {
        const fired = yield* fireMostOverdue(sql, fireDeadline)
        if (Option.isNone(fired)) return false
        metrics.deadlineFired(fired.value.kind, (fired.value.now - fired.value.dueAt) / 1000)
        yield* announce({ orgId: fired.value.orgId, sessionId: fired.value.sessionId, topics: [Topics.events] })
        return true
      })

      const earliestDue = DueRows.returned(sql`
        SELECT min(next_due_at) AS at, clock_timestamp() AS now FROM approvals WHERE next_due_at IS NOT NULL
      `).pipe(
        Effect.map((row) => ({ at: row.at === null ? null : row.at.getTime(), now: row.now.getTime() }))
      )

      return Approvals.of({
        putPolicy: Effect.fn("Approvals.putPolicy")(policies.putPolicy),
        listPolicies: Effect.fn("Approvals.listPolicies")(policies.listPolicies),
        dryRun: Effect.fn("Approvals.dryRun")(policies.dryRun),
        answerStep: (orgId, sessionId, step, sentBefore) =>
          Effect.flatMap(
            policies.ruleFor(orgId, step.action_class),
            (policy) => answerStep(ruleWorkers, orgId, sessionId, step, policy, sentBefore)
          ),
        forgetRules: policies.forgetRules,
        get,
        decide,
        fireNextDue,
        earliestDue
      })
    })
  )
}
