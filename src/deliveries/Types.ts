/**
 * The delivery queue's vocabulary: what a delivery is, what a claim holds,
 * what an attempt's outcome can be, and how a row maps to a delivery.
 */
import { Duration } from "effect"
import type { DeliveryRow } from "./Rows.ts"

/** `email`: reviewer email notifications (target = the organization). */
export type DeliveryKind = "webhook" | "telemetry" | "email"

export type DeliveryStatus = "queued" | "sending" | "retrying" | "delivered" | "failed" | "partial"

/**
 * Kinds whose deliveries to a concurrent (not strict) target are stored
 * `logged`: a log read past the target's cursor under a lease of the
 * whole target (`Log.ts`), written again only when an attempt fails.
 * Telemetry batches and emails stay one row per lease: few, and a
 * telemetry success carries figures (`meta`) its record keeps.
 */
export const LOGGED_KINDS: ReadonlyArray<DeliveryKind> = ["webhook"]

/** A row's stored status: `logged` reads as queued, sending or delivered (`delivery_records`). */
export type StoredStatus = DeliveryStatus | "logged"

/** Statuses that still occupy the target's queue. */
export const UNDELIVERED: ReadonlyArray<DeliveryStatus> = ["queued", "sending", "retrying"]

export type DeliveryMeta = Readonly<Record<string, string | number | boolean | null>>

export interface Delivery {
  readonly id: string
  readonly seq: string
  readonly orgId: string
  readonly kind: DeliveryKind
  readonly targetId: string
  readonly status: DeliveryStatus
  readonly label: string | null
  readonly eventId: string | null
  /** Opaque to the queue; whoever enqueued it knows how to open it. */
  readonly payload: string | null
  readonly meta: DeliveryMeta
  readonly attempts: number
  readonly replays: number
  readonly lastError: string | null
  readonly nextAttemptAt: Date
  readonly createdAt: Date
  readonly finishedAt: Date | null
}

/** A delivery this process holds the lease of; `attempts` already counts the attempt being made. */
export interface Claimed extends Delivery {
  readonly leaseOwner: string
  /** The target's consecutive failures when claimed. */
  readonly targetFailures: number
  /** The bound the target shares with others (`setGroup`), if any: read with the claim. */
  readonly targetGroup?: string | undefined
  /**
   * The status it had before this claim (`sending` when it is taken over
   * from an expired lease; `logged` when handed out under its target's
   * lease, whose id is then `leaseOwner`).
   */
  readonly claimedFrom: StoredStatus
}

/** What a batch of settlements did. */
export interface Settled {
  /** Per item, in order: whether its lease was still held (only then was the outcome recorded). */
  readonly held: ReadonlyArray<boolean>
  /** Targets of the batch that are cooling down now, and for how much longer (as the database measured it). */
  readonly coolingFor: ReadonlyMap<string, Duration.Duration>
  /** Consecutive failed attempts of each target whose health the batch changed, as recorded. */
  readonly failures: ReadonlyMap<string, number>
  /**
   * `false` when the statement saw no row of the log waiting, not handed
   * out, for any of the batch's targets: a claim of the log now would find
   * nothing the last one left. Otherwise (undefined too) it may.
   */
  readonly logWaiting?: boolean | undefined
  /**
   * `false` when the batch made no row on its own claimable sooner than the
   * per-row claim's last answer said: the log's successes alone, none of
   * them ending its target's failures or cooldown. Otherwise (undefined
   * too) it may have.
   */
  readonly rowsChanged?: boolean | undefined
}

export interface Attempt {
  readonly attempt: number
  readonly at: Date
  readonly statusCode: number | null
  readonly error: string | null
  readonly responseSnippet: string | null
  readonly durationMs: number
}

export type Outcome =
  | { readonly _tag: "Delivered"; readonly meta?: DeliveryMeta | undefined }
  | { readonly _tag: "Partial"; readonly error: string; readonly meta?: DeliveryMeta | undefined }
  /** Tried again `after` this long, counted from the database's `now()` when the outcome is recorded. */
  | {
    readonly _tag: "Retry"
    readonly after: Duration.Duration
    readonly error: string
    readonly meta?: DeliveryMeta | undefined
  }
  | { readonly _tag: "Failed"; readonly error: string; readonly meta?: DeliveryMeta | undefined }

export const Outcome = {
  delivered: (meta?: DeliveryMeta): Outcome => ({ _tag: "Delivered", meta }),
  partial: (error: string, meta?: DeliveryMeta): Outcome => ({ _tag: "Partial", error, meta }),
  retry: (after: Duration.Input, error: string, meta?: DeliveryMeta): Outcome => ({
    _tag: "Retry",
    after: Duration.fromInputUnsafe(after),
    error,
    meta
  }),
  failed: (error: string, meta?: DeliveryMeta): Outcome => ({ _tag: "Failed", error, meta })
}

/** What one attempt looked like on the wire; stored per attempt, never the payload. */
export interface AttemptRecord {
  readonly statusCode?: number | undefined
  readonly error?: string | undefined
  /** Already truncated by the caller. */
  readonly responseSnippet?: string | undefined
  readonly durationMs: number
}

/**
 * What a send answers: how it went, and what to record of the attempt; or,
 * `giveBack`, that it was not an attempt against the receiver (the
 * database was unavailable, `defectSettlement` in `worker/Start.ts`; or no
 * broker connection was free in time, a limit of this process): the
 * delivery is given back unrecorded, and the outcome and attempt only say
 * so to the send's span.
 */
export interface Settlement {
  readonly outcome: Outcome
  readonly attempt: AttemptRecord
  readonly giveBack?: true | undefined
  readonly signal?: TargetSignal | undefined
}

/**
 * What an attempt says of its target, applied once the attempt is
 * recorded (the worker's `health`), from the counts the settle wrote: it
 * delivered after failures, it failed, or it is gone for good.
 */
export type TargetSignal = "recovered" | "failing" | "gone"

/**
 * Cooldown after failed attempts: from the `after`-th consecutive failure on,
 * `base * 2^(failures - after)`, at most `cap`.
 */
export interface CooldownPolicy {
  readonly after: number
  readonly base: Duration.Input
  readonly cap: Duration.Input
}

export interface SettleItem {
  readonly claimed: Claimed
  readonly outcome: Outcome
  readonly attempt: AttemptRecord
  readonly cooldown?: CooldownPolicy | undefined
  readonly signal?: TargetSignal | undefined
}

/** A target of one organization, and the kind of its deliveries. */
export interface TargetRef {
  readonly orgId: string
  readonly kind: DeliveryKind
  readonly targetId: string
}

export interface EnqueueInput extends TargetRef {
  readonly label?: string | undefined
  readonly eventId?: string | undefined
  readonly payload?: string | undefined
  readonly meta?: DeliveryMeta | undefined
  /** Most undelivered rows the target may hold; a new one past it is stored as `failed`. */
  readonly capacity: number
}

/**
 * A delivery whose first attempt was made before it was stored (a
 * telemetry batch sent from memory): recorded with that attempt's outcome.
 */
export interface AttemptedInput extends TargetRef {
  readonly status: "delivered" | "partial" | "retrying" | "failed"
  /** Kept for a retry or a replay; null once delivered. */
  readonly payload: string | null
  readonly meta: DeliveryMeta
  readonly error: string | null
  /** A `retrying` one's next attempt, this long after the database's `now()` (default at once). */
  readonly retryAfter?: Duration.Input | undefined
}

export interface ClaimOptions {
  readonly limit: number
  readonly leaseFor: Duration.Input
  /** Most deliveries of one target under live leases at once (all processes together). */
  readonly perTarget: number
  /**
   * The same for a target whose latest recorded attempt failed (consecutive
   * failures > 0): a failing target is probed, not flooded, whatever the
   * worker's other settings. Defaults to `perTarget`.
   */
  readonly perFailingTarget?: number | undefined
  /** Targets not to claim for now (the caller could not start their deliveries). */
  readonly skipTargets?: ReadonlyArray<string> | undefined
  /**
   * `false`: the log is not asked (the caller knows nothing new can wait
   * there since its last claim), only the per-row claim runs. Default true.
   */
  readonly log?: boolean | undefined
  /**
   * `false`: the per-row statement is not run (the caller holds its last
   * answer, which still stands). Default true.
   */
  readonly rows?: boolean | undefined
}

export interface ReplayInput {
  readonly orgId: string
  readonly kind: DeliveryKind
  /** When given, the delivery must belong to this target (path `/:id/deliveries/:delivery`). */
  readonly targetId?: string | undefined
  readonly deliveryId: string
  readonly capacity: number
  /** Beyond `status = failed`, whether this delivery can be sent again (e.g. its payload is still kept). */
  readonly replayable?: ((delivery: Delivery) => boolean) | undefined
}

/** A delivery of its row as read (`COLUMNS`), decoded by `DeliveryRow`. */
export const toDelivery = (row: typeof DeliveryRow.Type): Delivery => ({
  id: row.id,
  seq: String(row.seq),
  orgId: row.org_id,
  kind: row.kind,
  targetId: row.target_id,
  // A row read as stored (an enqueue's answer): a logged one is waiting.
  status: row.status === "logged" ? "queued" : row.status,
  label: row.label,
  eventId: row.event_id,
  payload: row.payload,
  meta: row.meta ?? {},
  attempts: row.attempts,
  replays: row.replays,
  lastError: row.last_error,
  nextAttemptAt: row.next_attempt_at,
  createdAt: row.created_at,
  finishedAt: row.finished_at
})

export const COLUMNS = `id, seq, org_id, kind, target_id, status, label, event_id, payload, meta, attempts, replays,
  last_error, next_attempt_at, created_at, finished_at`
