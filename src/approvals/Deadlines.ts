/**
 * The time logic of an approval, free of the database: when its deadlines
 * fall, which one is due next, and what firing it changes. All instants are
 * epoch milliseconds.
 */
import { escalationCount } from "../api/Assignment.ts"
import type { PolicyMode, TimeoutAction } from "../api/Policies.ts"

export interface PolicyRule {
  readonly mode: PolicyMode
  readonly review_seconds: number
  readonly expiring_notice_seconds: number
  readonly escalation_seconds: number | null
  readonly timeout_action: TimeoutAction
  /** How many distinct people must approve (absent: one). */
  readonly quorum?: number | undefined
  /** The reviewer group the approval is assigned to, and the groups its escalations hand it to, in order (absent: none). */
  readonly group?: string | undefined
  readonly escalation_chain?: ReadonlyArray<string> | undefined
}

/**
 * The rule for an action class without a policy: a person must approve,
 * within 15 minutes, with an `approval.expiring` notice 5 minutes before;
 * no escalation; an undecided step is rejected.
 */
export const DEFAULT_POLICY: PolicyRule = {
  mode: "require_approval",
  review_seconds: 900,
  expiring_notice_seconds: 300,
  escalation_seconds: null,
  timeout_action: "reject"
}

export type DueKind = "expiring" | "escalate" | "expire"

export interface DeadlineState {
  /** End of the current review window. */
  readonly deadlineAt: number
  /** When the approval expires if nobody decides (the final deadline). */
  readonly expiresAt: number
  /** When `approval.expiring` is due; `null` when the policy sends no notice. */
  readonly expiringAt: number | null
  readonly escalationSeconds: number | null
  readonly expiringSent: boolean
  /** How many escalations the approval gets (`escalationCount`: one per group of the chain, one without a chain, none without `escalation_seconds`). */
  readonly escalations: number
  /** How many of them have fired. */
  readonly escalationsDone: number
}

/**
 * The deadlines of an approval requested at `now` under `rule`: the first
 * window, then one `escalation_seconds` window per escalation; it expires
 * when the last one ends.
 */
export const plan = (rule: PolicyRule, now: number): DeadlineState => {
  const deadlineAt = now + rule.review_seconds * 1000
  const escalations = escalationCount(rule)
  const expiresAt = deadlineAt + (rule.escalation_seconds ?? 0) * escalations * 1000
  return {
    deadlineAt,
    expiresAt,
    expiringAt: rule.expiring_notice_seconds > 0 ? expiresAt - rule.expiring_notice_seconds * 1000 : null,
    escalationSeconds: rule.escalation_seconds,
    expiringSent: false,
    escalations,
    escalationsDone: 0
  }
}

/** Whether an escalation is still to come (at `deadlineAt`). */
export const escalationPending = (state: Pick<DeadlineState, "escalations" | "escalationsDone">) =>
  state.escalationsDone < state.escalations

const order: Record<DueKind, number> = { expiring: 0, escalate: 1, expire: 2 }

/**
 * The next deadline still to fire. At equal instants the notice goes first,
 * then the escalation, then expiry, so every one fires, each once, in the
 * order a reader expects (also after a restart that finds them all past).
 */
export const nextDue = (state: DeadlineState): { readonly at: number; readonly kind: DueKind } => {
  const candidates: Array<{ at: number; kind: DueKind }> = []
  if (state.expiringAt !== null && !state.expiringSent) candidates.push({ at: state.expiringAt, kind: "expiring" })
  if (state.escalationSeconds !== null && escalationPending(state)) {
    candidates.push({ at: state.deadlineAt, kind: "escalate" })
  }
  candidates.push({ at: state.expiresAt, kind: "expire" })
  candidates.sort((a, b) => a.at - b.at || order[a.kind] - order[b.kind])
  return candidates[0]!
}

/** The state after `kind` fired. An escalation opens the next window; the last one ends at `expiresAt`. */
export const fire = (state: DeadlineState, kind: Exclude<DueKind, "expire">): DeadlineState =>
  kind === "expiring"
    ? { ...state, expiringSent: true }
    : {
      ...state,
      escalationsDone: state.escalationsDone + 1,
      deadlineAt: state.deadlineAt + (state.escalationSeconds ?? 0) * 1000
    }

/**
 * How long the scheduler may sleep: until the earliest deadline, but never
 * longer than `capMs` (deadlines written by other processes are found by
 * polling when no signal reaches us).
 */
export const sleepMillis = (nextDueAt: number | null, now: number, capMs: number): number =>
  nextDueAt === null ? capMs : Math.max(0, Math.min(capMs, nextDueAt - now))
