/**
 * Approval policies and the approval lifecycle: request, a person's
 * decision, and the deadlines (expiring notice, escalation, expiry). Each
 * transition writes its lifecycle event to the outbox in the same
 * transaction; a decision or an expiry also settles the step and records a
 * session event.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { type ApprovalEventType, type ApprovalSnapshot, Policy, type PolicyInput, TimeoutAction } from "../api/Approvals.ts"
import { InvalidRequest, InvalidTransition, LimitReached, NotFound } from "../api/Errors.ts"
import { appendSessionEvent, hubSignal } from "../streams/SessionEvents.ts"
import { SvcConfig } from "../platform/Config.ts"
import { Metrics } from "../observability/Metrics.ts"
import { refuseAtCap } from "../platform/OrgLimits.ts"
import { Instant, InstantOrNull, rowsOf, Timestamp } from "../platform/Rows.ts"
import { databaseNow, iso } from "../platform/Time.ts"
import { type Broadcast, type Topic, Topics, Wakeups } from "../platform/Wakeups.ts"
import { DEFAULT_POLICY, type DeadlineState, type DueKind, fire, nextDue, noticeFits } from "./Deadlines.ts"
import { ApprovalColumns, type ApprovalRow, makeApprovalEvent, snapshotOf, writeToOutbox } from "./Events.ts"
import { scrubReason } from "./Reasons.ts"
import { appendApprovalStream, approvalsTopic, type StreamEntry } from "./OrgStream.ts"
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

/** An `approvals` row with its deadline state. */
const ApprovalRows = rowsOf("approvals", Schema.Struct({
  ...ApprovalColumns.fields,
  expiring_at: InstantOrNull,
  escalation_seconds: Schema.NullOr(Schema.Number),
  expiring_sent: Schema.Boolean,
  escalated: Schema.Boolean,
  next_due_kind: Schema.NullOr(Schema.Literals(["expiring", "escalate", "expire"]))
}))
type FullApprovalRow = NonNullable<Effect.Success<ReturnType<typeof ApprovalRows.one>>>

const DueRows = rowsOf("approvals", Schema.Struct({ at: InstantOrNull, now: Instant }))

const toPolicy = (row: PolicyRow): Policy => ({
  action_class: row.action_class,
  mode: row.mode,
  review_seconds: row.review_seconds,
  expiring_notice_seconds: row.expiring_notice_seconds,
  ...(row.escalation_seconds === null ? {} : { escalation_seconds: row.escalation_seconds }),
  timeout_action: row.timeout_action,
  updated_at: row.updated_at
})

const stateOf = (row: FullApprovalRow): DeadlineState => ({
  deadlineAt: row.deadline_at.getTime(),
  expiresAt: row.expires_at.getTime(),
  expiringAt: row.expiring_at === null ? null : row.expiring_at.getTime(),
  escalationSeconds: row.escalation_seconds,
  expiringSent: row.expiring_sent,
  escalated: row.escalated
})

const isoMs = (ms: number) => new Date(ms).toISOString()

const COLUMNS = "id, org_id, session_id, step_id, task_id, status, deadline_at, expires_at, timeout_action, decided_at, decided_by, decision_reason, expiring_at, escalation_seconds, expiring_sent, escalated, next_due_kind"

export class Approvals extends Context.Service<Approvals, {
  readonly putPolicy: (orgId: string, actionClass: string, input: PolicyInput) => Effect.Effect<Policy, InvalidRequest | LimitReached>
  readonly listPolicies: (orgId: string) => Effect.Effect<ReadonlyArray<Policy>>
  /**
   * The organization's rule for `actionClass`, or the default rule, from the
   * process's cache (`PolicyCache.ts`): a statement that acts on it checks
   * that it is still the stored one (`stored` and the values).
   */
  readonly ruleFor: (orgId: string, actionClass: string) => Effect.Effect<CachedRule>
  /** Forgets the organization's cached rules here (a statement found one out of date). */
  readonly forgetRules: (orgId: string) => Effect.Effect<void>
  readonly get: (orgId: string, approvalId: string) => Effect.Effect<ApprovalSnapshot, NotFound>
  readonly decide: (
    orgId: string,
    /** Who decides, as records name them: an API key's id, `console:<person>` or `email:<reviewer address>`. */
    actor: string,
    approvalId: string,
    decision: "approve" | "reject",
    /** Why, in the decider's words (already checked for length); recognizable secrets are removed before it is stored. */
    reason?: string | undefined
  ) => Effect.Effect<ApprovalSnapshot, NotFound | InvalidTransition>
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

      const putPolicy = Effect.fn("Approvals.putPolicy")(function*(orgId: string, actionClass: string, input: PolicyInput) {
        const escalation = input.escalation_seconds ?? null
        if (input.mode === "require_approval" && !noticeFits({ ...input, escalation_seconds: escalation })) {
          return yield* new InvalidRequest({
            field: "expiring_notice_seconds",
            detail: "expiring_notice_seconds must be shorter than review_seconds plus escalation_seconds."
          })
        }
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
          RETURNING action_class, mode, review_seconds, expiring_notice_seconds, escalation_seconds, timeout_action, updated_at
        `)
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        yield* wakeups.signal(policiesSignal(orgId))
        return toPolicy(row)
      })

      const listPolicies = Effect.fn("Approvals.listPolicies")(function*(orgId: string) {
        const rows = yield* PolicyRows.all(sql`
          SELECT action_class, mode, review_seconds, expiring_notice_seconds, escalation_seconds, timeout_action, updated_at
          FROM approval_policies WHERE org_id = ${orgId} ORDER BY action_class
        `)
        return rows.map(toPolicy)
      })

      const loadRule = (orgId: string, actionClass: string) =>
        Effect.map(
          PolicyRows.one(sql`
            SELECT action_class, mode, review_seconds, expiring_notice_seconds, escalation_seconds, timeout_action, updated_at
            FROM approval_policies WHERE org_id = ${orgId} AND action_class = ${actionClass}
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
      const ruleFor = policies.get

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

      /** Writes the webhook event; `log` collects it for the organization's approval stream (appended last). */
      const emit = (type: ApprovalEventType, row: ApprovalRow, at: number, log?: Array<StreamEntry>) =>
        Effect.andThen(
          Effect.sync(() => log?.push({ type, approvalId: row.id })),
          writeToOutbox(sql, makeApprovalEvent(type, row.org_id, snapshotOf(row), new Date(at)))
        )

      const get = Effect.fn("Approvals.get")(function*(orgId: string, approvalId: string) {
        const row = yield* ApprovalRows.one(sql`
          SELECT ${sql.literal(COLUMNS)} FROM approvals WHERE id = ${approvalId} AND org_id = ${orgId}
        `)
        if (row === undefined) return yield* new NotFound({ detail: "No such approval." })
        return snapshotOf(row)
      })

      const decide = Effect.fn("Approvals.decide")(function*(
        orgId: string,
        actor: string,
        approvalId: string,
        decision: "approve" | "reject",
        reason?: string | undefined
      ) {
        yield* Effect.annotateCurrentSpan({ "svc.approval_id": approvalId })
        const stored = reason === undefined ? null : yield* scrubReason(reason)
        const status = decision === "approve" ? "approved" : "rejected"
        const resolution = decision === "approve" ? "allow" : "reject"
        const log: Array<StreamEntry> = []
        const decided = yield* sql.withTransaction(Effect.gen(function*() {
          // Only a pending approval moves: of two racing decisions, the second
          // waits for the first's row lock, then finds it closed.
          const current = yield* ApprovalRows.one(sql`
            SELECT ${sql.literal(COLUMNS)} FROM approvals WHERE id = ${approvalId} AND org_id = ${orgId} FOR UPDATE
          `)
          if (current === undefined) return { _tag: "missing" as const }
          if (current.status !== "pending") return { _tag: "closed" as const, status: current.status }
          const now = yield* databaseNow(sql)
          if (current.expires_at.getTime() <= now) {
            // The final deadline lapsed before the scheduler fired it (a
            // process down or busy): the approval closed without a decision.
            // Fire what is due, in order, here under the row lock.
            let row: FullApprovalRow | undefined = current
            let sessionId: string | null = null
            while (row !== undefined && row.status === "pending") {
              sessionId = (yield* fireDeadline(row, now, log)).sessionId ?? sessionId
              row = yield* ApprovalRows.one(sql`SELECT ${sql.literal(COLUMNS)} FROM approvals WHERE id = ${approvalId}`)
            }
            yield* appendApprovalStream(sql, orgId, log)
            return { _tag: "lapsed" as const, sessionId }
          }
          const row = yield* ApprovalRows.returned(sql`
            UPDATE approvals SET status = ${status}, decided_at = ${isoMs(now)}::timestamptz, decided_by = ${actor},
              decision_reason = ${stored}, next_due_at = NULL, next_due_kind = NULL
            WHERE id = ${approvalId}
            RETURNING ${sql.literal(COLUMNS)}
          `)
          yield* sql`
            UPDATE agent_steps SET resolution = ${resolution} WHERE session_id = ${row.session_id} AND step_id = ${row.step_id}
          `
          yield* emit(decision === "approve" ? "approval.approved" : "approval.rejected", row, now, log)
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
              ...(stored === null ? {} : { decision_reason: stored })
            }
          })
          yield* appendApprovalStream(sql, orgId, log)
          return { _tag: "decided" as const, row }
        })).pipe(Effect.orDie)
        if (decided._tag === "missing") return yield* new NotFound({ detail: "No such approval." })
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

      /** Applies the due deadline of a claimed row (inside the claiming transaction). */
      const fireDeadline = Effect.fn("Approvals.fireDeadline")(function*(row: FullApprovalRow, now: number, log: Array<StreamEntry>) {
        yield* Effect.annotateCurrentSpan({ "svc.org_id": row.org_id, "svc.approval_id": row.id })
        const state = stateOf(row)
        const due = nextDue(state)
        yield* Effect.annotateCurrentSpan({ "svc.deadline": due.kind })
        if (due.kind === "expire") {
          const expired = yield* ApprovalRows.returned(sql`
            UPDATE approvals SET status = 'expired', next_due_at = NULL, next_due_kind = NULL
            WHERE id = ${row.id} RETURNING ${sql.literal(COLUMNS)}
          `)
          yield* sql`
            UPDATE agent_steps SET resolution = ${row.timeout_action} WHERE session_id = ${row.session_id} AND step_id = ${row.step_id}
          `
          yield* emit("approval.expired", expired, now, log)
          yield* appendSessionEvent(sql, {
            sessionId: row.session_id,
            orgId: row.org_id,
            name: "approval:expired",
            data: {
              approval_id: row.id,
              step_id: row.step_id,
              timeout_action: row.timeout_action,
              resolution: row.timeout_action,
              expired_at: isoMs(now)
            }
          })
          return { sessionId: row.session_id as string | null }
        }
        const after = fire(state, due.kind)
        const next = nextDue(after)
        const updated = yield* ApprovalRows.returned(sql`
          UPDATE approvals SET expiring_sent = ${after.expiringSent}, escalated = ${after.escalated},
            deadline_at = ${isoMs(after.deadlineAt)}::timestamptz,
            next_due_at = ${isoMs(next.at)}::timestamptz, next_due_kind = ${next.kind}
          WHERE id = ${row.id} RETURNING ${sql.literal(COLUMNS)}
        `)
        yield* emit(due.kind === "expiring" ? "approval.expiring" : "approval.escalated", updated, now, log)
        return { sessionId: null }
      })

      const fireNextDue = Effect.gen(function*() {
        const fired = yield* sql.withTransaction(Effect.gen(function*() {
          const row = yield* ApprovalRows.one(sql`
            SELECT ${sql.literal(COLUMNS)} FROM approvals
            WHERE next_due_at <= now() AND status = 'pending'
            ORDER BY next_due_at LIMIT 1
            FOR UPDATE SKIP LOCKED
          `)
          if (row === undefined) {
            return Option.none<{ sessionId: string | null; orgId: string; kind: DueKind; dueAt: number; now: number }>()
          }
          const due = nextDue(stateOf(row))
          const now = yield* databaseNow(sql)
          const log: Array<StreamEntry> = []
          const fired = yield* fireDeadline(row, now, log)
          yield* appendApprovalStream(sql, row.org_id, log)
          return Option.some({ ...fired, orgId: row.org_id, kind: due.kind, dueAt: due.at, now })
        })).pipe(Effect.orDie)
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
        putPolicy,
        listPolicies,
        ruleFor,
        forgetRules: policies.invalidate,
        get,
        decide,
        fireNextDue,
        earliestDue
      })
    })
  )
}
