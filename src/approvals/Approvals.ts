/**
 * Approval policies (`Policies.ts`) and the approval lifecycle: request, a
 * person's decision, and the deadlines (expiring notice, escalation,
 * expiry: `Firing.ts`). Each transition writes its lifecycle event to the
 * outbox in the same transaction; a decision or an expiry also settles the
 * step and records a session event.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import type { ApprovalSnapshot, DryRunAnswer, DryRunInput, Policy, PolicyInput } from "../api/Approvals.ts"
import { ArgumentsShapeMismatch, type ArgumentsTooComplex } from "../api/ApprovalEdits.ts"
import {
  type AnswerSchemaTooComplex,
  type InvalidRequest,
  InvalidTransition,
  type LimitReached,
  NotFound,
  type PolicyRulesTooComplex,
  type RateLimited,
  Unauthenticated,
  type ValidationBusy
} from "../api/Errors.ts"
import { AnswerSchemas } from "../tasks/AnswerSchema.ts"
import { appendSessionEvent, hubSignal } from "../streams/SessionEvents.ts"
import { SvcConfig } from "../platform/Config.ts"
import { Metrics } from "../observability/Metrics.ts"
import { Instant, InstantOrNull, rowsOf } from "../platform/Rows.ts"
import { databaseNow, iso } from "../platform/Time.ts"
import { type Topic, Topics, Wakeups } from "../database/Wakeups.ts"
import { type DecisionEdit, editSnapshot, makeEdits, NOTHING_SETTLED, settledValues } from "./Edits.ts"
import { snapshotOf } from "./Events.ts"
import { APPROVAL_COLUMNS, ApprovalRows, emit, fireDeadline as fireDue, fireMostOverdue, type FullApprovalRow, isoMs } from "./Firing.ts"
import { scrubReason } from "./Reasons.ts"
import { appendApprovalStream, approvalsTopic, type StreamEntry } from "./OrgStream.ts"
import { makePolicies } from "./Policies.ts"
import type { CachedRule } from "./PolicyCache.ts"
import { announceVote, castVote, isSharedAddress, quorumMembers, standsFor } from "./Votes.ts"
import { AlreadyVoted, PersonRequired } from "../api/Votes.ts"
import { NotAssigned } from "../api/Reviewers.ts"
import { standing } from "./Reviewers.ts"
import { RuleWorkers } from "./RuleWorkers.ts"

/** A decider's precondition (`Approvals.decide`): `holds` runs in the decision's transaction; `refused` is the failure when it does not hold. */
export interface DecisionGuard<E> {
  readonly holds: Effect.Effect<boolean>
  readonly refused: E
}

const DueRows = rowsOf("approvals", Schema.Struct({ at: InstantOrNull, now: Instant }))

export class Approvals extends Context.Service<Approvals, {
  readonly putPolicy: (
    orgId: string,
    actionClass: string,
    input: PolicyInput
  ) => Effect.Effect<Policy, InvalidRequest | NotFound | LimitReached | PolicyRulesTooComplex | AnswerSchemaTooComplex | ValidationBusy>
  readonly listPolicies: (orgId: string) => Effect.Effect<ReadonlyArray<Policy>>
  /** Evaluates the stored (or a given) policy against a sample step; creates nothing. */
  readonly dryRun: (
    orgId: string,
    actionClass: string,
    input: DryRunInput
  ) => Effect.Effect<DryRunAnswer, InvalidRequest | PolicyRulesTooComplex | AnswerSchemaTooComplex | ValidationBusy | RateLimited>
  /**
   * The organization's rule for `actionClass`, or the default rule, from the
   * process's cache (`PolicyCache.ts`): a statement that acts on it checks
   * that it is still the stored one (`stored` and the values).
   */
  readonly ruleFor: (orgId: string, actionClass: string) => Effect.Effect<CachedRule>
  /** Forgets the organization's cached rules here (a statement found one out of date). */
  readonly forgetRules: (orgId: string) => Effect.Effect<void>
  readonly get: (orgId: string, approvalId: string) => Effect.Effect<ApprovalSnapshot, NotFound>
  readonly decide: <E = never>(
    orgId: string,
    /** Who decides, as records name them: an API key's id, `console:<person>` or `email:<reviewer address>`. */
    actor: string,
    approvalId: string,
    decision: "approve" | "reject",
    /** Why, in the decider's words (already checked for length); recognizable secrets are removed before it is stored. */
    reason?: string | undefined,
    /**
     * What must still hold for this decider, checked in the decision's
     * transaction once the approval's row is locked (so a concurrent change
     * to what it reads commits before or after the decision, never between):
     * false decides nothing and fails with `refused`.
     */
    guard?: DecisionGuard<E>,
    /** Edited arguments (with approve) or a response for the agent (with reject): `Edits.ts`. */
    edit?: DecisionEdit
  ) => Effect.Effect<
    ApprovalSnapshot,
    | NotFound
    | InvalidTransition
    | AlreadyVoted
    | NotAssigned
    | PersonRequired
    | Unauthenticated
    | ArgumentsShapeMismatch
    | ArgumentsTooComplex
    | ValidationBusy
    | E
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

      const ruleWorkers = yield* RuleWorkers
      const edits = makeEdits(sql, yield* AnswerSchemas, ruleWorkers, config.answerValidationQueue)
      const policies = yield* makePolicies(sql, config, wakeups, edits.checkArgumentsSchema, ruleWorkers)
      /** Applies the due deadline of a claimed row (`Firing.ts`), inside the claiming transaction. */
      const fireDeadline = Effect.fn("Approvals.fireDeadline")((row: FullApprovalRow, now: number, log: Array<StreamEntry>) =>
        fireDue(sql, row, now, log)
      )

      /**
       * After a transition has committed: wake the workers of `topics` (the
       * outbox dispatcher, the deadline scheduler), and the streams that
       * show it (the session's, and the organization's approval stream).
       */
      const announce = (change: { readonly orgId: string; readonly sessionId: string | null; readonly topics: ReadonlyArray<Topic> }) =>
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

      /**
       * The cheap refusals of a decision with edited arguments, read before
       * the edit is checked or compared (so 404, 409 and 403 come before any
       * 422): a missing or closed approval, a group the decider is not in nor
       * delegated to, a quorum (which takes no edits).
       */
      const editRefused = (orgId: string, actor: string, approvalId: string) =>
        Effect.gen(function*() {
          const current = yield* ApprovalRows.one(sql`
            SELECT ${sql.literal(APPROVAL_COLUMNS)} FROM approvals WHERE id = ${approvalId} AND org_id = ${orgId}
          `)
          if (current === undefined) return { _tag: "missing" as const }
          if (current.status !== "pending") return { _tag: "closed" as const, status: current.status }
          const who = yield* standing(sql, orgId, actor, approvalId, current.assigned_group)
          if (who.person === null) return { _tag: "revoked" as const }
          if (who.decidedFor === null) return { _tag: "notAssigned" as const, group: current.assigned_group ?? "" }
          if (current.quorum > 1) return { _tag: "editWithQuorum" as const }
          return undefined
        })

      const decide = Effect.fn("Approvals.decide")(function*<E = never>(
        orgId: string,
        actor: string,
        approvalId: string,
        decision: "approve" | "reject",
        reason?: string | undefined,
        guard?: DecisionGuard<E>,
        edit?: DecisionEdit
      ) {
        yield* Effect.annotateCurrentSpan({ "svc.approval_id": approvalId })
        // Before any work on edited arguments, what refuses the decider anyway (the transaction checks it again).
        const refused = edit?.arguments === undefined
          ? undefined
          : (yield* editRefused(orgId, actor, approvalId)) ??
            (guard !== undefined && !(yield* guard.holds) ? { _tag: "refused" as const } : undefined)
        // Edited arguments are checked against the class's schema before the row is locked.
        const settled = refused === undefined ? yield* edits.settle(orgId, approvalId, edit) : NOTHING_SETTLED
        if (settled === undefined) return yield* new NotFound({ detail: "No such approval." })
        const settle = settledValues(settled)
        const stored = reason === undefined ? null : yield* scrubReason(reason)
        const status = decision === "approve" ? "approved" : "rejected"
        const resolution = decision === "approve" ? "allow" : "reject"
        const log: Array<StreamEntry> = []
        const decided = refused ?? (yield* sql.withTransaction(Effect.gen(function*() {
          // Only a pending approval moves: of two racing decisions, the second
          // waits for the first's row lock, then finds it closed.
          const current = yield* ApprovalRows.one(sql`
            SELECT ${sql.literal(APPROVAL_COLUMNS)} FROM approvals WHERE id = ${approvalId} AND org_id = ${orgId} FOR UPDATE
          `)
          if (current === undefined) return { _tag: "missing" as const }
          if (current.status !== "pending") return { _tag: "closed" as const, status: current.status }
          if (guard !== undefined && !(yield* guard.holds)) return { _tag: "refused" as const }
          // Who decides, and for whom (`Reviewers.ts`, `standing`): a key revoked meanwhile decides
          // nothing; on an approval assigned to a group only its members and their active delegates do.
          const who = yield* standing(sql, orgId, actor, approvalId, current.assigned_group)
          if (who.person === null) return { _tag: "revoked" as const }
          if (who.decidedFor === null) return { _tag: "notAssigned" as const, group: current.assigned_group ?? "" }
          // The shared reviewer address names no person: it cannot be one of several.
          if (current.quorum > 1 && isSharedAddress(actor)) return { _tag: "unattributed" as const }
          const voter = { actor, person: who.person, decidedFor: who.decidedFor }
          const now = yield* databaseNow(sql)
          if (current.expires_at.getTime() <= now) {
            // The final deadline lapsed before the scheduler fired it (a
            // process down or busy): the approval closed without a decision.
            // Fire what is due, in order, here under the row lock.
            let row: FullApprovalRow | undefined = current
            let sessionId: string | null = null
            while (row !== undefined && row.status === "pending") {
              sessionId = (yield* fireDeadline(row, now, log)).sessionId ?? sessionId
              row = yield* ApprovalRows.one(sql`SELECT ${sql.literal(APPROVAL_COLUMNS)} FROM approvals WHERE id = ${approvalId}`)
            }
            yield* appendApprovalStream(sql, orgId, log)
            return { _tag: "lapsed" as const, sessionId }
          }
          // Every approver of an approval that needs several approves the same
          // arguments: edits are taken only where one approval decides.
          if (settle.approvedArguments !== null && current.quorum > 1) return { _tag: "editWithQuorum" as const }
          // With a quorum, this decision is one vote (`Votes.ts`): it closes the approval only when it completes the quorum or rejects.
          const vote = yield* castVote(sql, current, voter, decision, stored, now)
          if (vote._tag === "duplicate") return { _tag: "duplicate" as const }
          if (vote._tag === "open") {
            yield* announceVote(sql, current, { voter, reason: stored, now, remaining: vote.remaining })
            const pending = yield* ApprovalRows.one(sql`SELECT ${sql.literal(APPROVAL_COLUMNS)} FROM approvals WHERE id = ${approvalId}`)
            return { _tag: "voted" as const, row: pending! }
          }
          const row = yield* ApprovalRows.returned(sql`
            UPDATE approvals SET status = ${status}, decided_at = ${isoMs(now)}::timestamptz, decided_by = ${actor},
              decision_reason = ${stored}, next_due_at = NULL, next_due_kind = NULL,
              approved_arguments = ${settle.approvedArguments}::jsonb, arguments_changed = ${settle.changed}::jsonb,
              arguments_digest = ${settle.digest}, response = ${settle.response}::jsonb
            WHERE id = ${approvalId}
            RETURNING ${sql.literal(APPROVAL_COLUMNS)}
          `)
          yield* sql`
            UPDATE agent_steps SET resolution = ${resolution}, approved_arguments = ${settle.approvedArguments}::jsonb,
              arguments_digest = ${settle.digest}, response = ${settle.response}::jsonb
            WHERE session_id = ${row.session_id} AND step_id = ${row.step_id}
          `
          yield* emit(sql, decision === "approve" ? "approval.approved" : "approval.rejected", row, now, log)
          yield* appendSessionEvent(sql, {
            sessionId: row.session_id,
            orgId,
            name: "approval:decided",
            data: {
              approval_id: row.id,
              step_id: row.step_id,
              decision: status,
              resolution,
              decided_at: iso(row.decided_at ?? new Date(now)),
              decided_by: actor,
              ...standsFor(actor, voter.person, voter.decidedFor),
              ...(stored === null ? {} : { decision_reason: stored }),
              ...quorumMembers(row),
              ...editSnapshot(settled)
            }
          })
          yield* appendApprovalStream(sql, orgId, log)
          return { _tag: "decided" as const, row }
        })).pipe(Effect.orDie))
        if (decided._tag === "missing") return yield* new NotFound({ detail: "No such approval." })
        if (decided._tag === "refused") return yield* Effect.fail(guard!.refused)
        if (decided._tag === "notAssigned") {
          return yield* new NotAssigned({
            assigned_group: decided.group,
            detail: `The approval is assigned to the reviewer group ${JSON.stringify(decided.group)}: only its members and their active delegates decide it.`
          })
        }
        if (decided._tag === "duplicate") {
          return yield* new AlreadyVoted({
            decided_by: actor,
            detail:
              "This person has already voted on this approval (with this or another of their credentials), or the member they stand in for has (themselves or through another delegate); a person votes once."
          })
        }
        if (decided._tag === "revoked") return yield* new Unauthenticated({ detail: "The API key is unknown or revoked." })
        if (decided._tag === "unattributed") {
          return yield* new PersonRequired({
            detail:
              "This approval needs several distinct people to approve it, and a decision through the organization's shared reviewer address names no person: decide in the console, or through a mail to your own address."
          })
        }
        if (decided._tag === "editWithQuorum") {
          const message = "cannot be edited when the approval needs several approvals: every approver approves the same arguments"
          return yield* new ArgumentsShapeMismatch({ field: "arguments", errors: [{ field: "arguments", message }], detail: `arguments ${message}.` })
        }
        if (decided._tag === "voted") {
          yield* announce({ orgId, sessionId: decided.row.session_id, topics: [] })
          return snapshotOf(decided.row)
        }
        if (decided._tag === "closed") {
          return yield* new InvalidTransition({
            status_now: decided.status,
            detail: `The approval is ${decided.status}; only a pending approval can be decided.`
          })
        }
        if (decided._tag === "lapsed") {
          yield* announce({ orgId, sessionId: decided.sessionId, topics: [Topics.events] })
          return yield* new InvalidTransition({
            status_now: "expired",
            detail: "The approval expired before this decision: its final deadline had passed. Its timeout action applies."
          })
        }
        yield* announce({ orgId, sessionId: decided.row.session_id, topics: [Topics.events, Topics.approvals] })
        return snapshotOf(decided.row)
      })

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
        ruleFor: policies.ruleFor,
        forgetRules: policies.forgetRules,
        get,
        decide,
        fireNextDue,
        earliestDue
      })
    })
  )
}
