/**
 * The shared delivery queue: webhook deliveries and telemetry batches are
 * both "deliveries" to a target (a notification endpoint or a telemetry
 * destination), kept in PostgreSQL and claimed with leases, so any `svc`
 * process may send them and none is lost when a process dies.
 *
 * Life of a delivery:
 *
 *   queued ──claim──▶ sending ──settle──▶ delivered | partial | failed
 *                        │   ▲                                  │
 *                 Retry  ▼   │ claim (due)            replay    │
 *                     retrying                  queued ◀────────┘
 *
 * A `sending` row whose lease expired (its process died between claiming
 * and settling) is claimable again: at least once, never silently dropped.
 *
 * Target health (`delivery_targets`) drives cooldowns: consecutive failed
 * attempts put a target in a capped exponential cooldown during which
 * nothing is claimed for it, replays included. The same row holds the
 * target's undelivered count (added to by the enqueue statements, taken
 * from by triggers on update and delete: migrations 0401, 0600), which the
 * capacity rule reads instead of counting the queue. The queue is the only
 * place that knows these rules; capabilities map statuses to their own API.
 *
 * This file is the service and its wiring; each operation lives in a file
 * of one idea, as a function of the SQL client: `Enqueue.ts` (the capacity
 * rule), `Leases.ts` (claim, settle, release; the hot statements are in
 * `Statements.ts`), `Replay.ts`, `Listing.ts` (reads and counts),
 * `Targets.ts` (a target's failures and removal, its cooldown) and
 * `Retention.ts`. Spans are opened here, named `DeliveryQueue.<operation>`.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option } from "effect"
import type { Statement } from "effect/sql"
import type { ReplayError } from "./Errors.ts"
import { DatabaseInfo } from "../platform/Database.ts"
import { Topics, Wakeups } from "../platform/Wakeups.ts"
import * as Enqueue from "./Enqueue.ts"
import * as Leases from "./Leases.ts"
import * as Listing from "./Listing.ts"
import * as Replay from "./Replay.ts"
import * as Retention from "./Retention.ts"
import { nextDueStatement } from "./Statements.ts"
import * as Targets from "./Targets.ts"

export * from "./Types.ts"
import type {
  Attempt,
  AttemptedInput,
  AttemptRecord,
  Claimed,
  ClaimOptions,
  CooldownPolicy,
  Delivery,
  DeliveryKind,
  EnqueueInput,
  Outcome,
  ReplayInput,
  Settled,
  SettleItem
} from "./Types.ts"

/** `Wakeups` topic of a kind's workers. */
export const wakeTopic = (kind: DeliveryKind) => Topics.deliveries(kind)

export class DeliveryQueue extends Context.Service<DeliveryQueue, {
  /** Adds a delivery (in the caller's transaction, if any). Past `capacity` it is recorded as `failed`, never dropped. */
  readonly enqueue: (input: EnqueueInput) => Effect.Effect<Delivery>
  /** `enqueue` of each input in order, in one statement (same capacity rule, same order of rows). */
  readonly enqueueMany: (inputs: ReadonlyArray<EnqueueInput>) => Effect.Effect<ReadonlyArray<Delivery>>
  /** `enqueueMany` without reading the new rows back (a fan-out of thousands need not parse them); answers how many. */
  readonly enqueueAll: (inputs: ReadonlyArray<EnqueueInput>) => Effect.Effect<number>
  /** Stores deliveries whose first attempt was made before they were stored (`AttemptedInput`), in one statement. */
  readonly recordAttempted: (inputs: ReadonlyArray<AttemptedInput>) => Effect.Effect<void>
  /**
   * `enqueueAll` of rows a query selects, in one statement with the
   * caller's own work (a fan-out that marks its source rows taken): `with`
   * adds the caller's common table expressions; `input` selects
   * `(ord, org_id, kind, target_id, label, event_id, payload, meta,
   * capacity)`, rows enqueued in `ord` order under the same capacity rule;
   * `select` is the statement's result, which may read `inserted(kind)`.
   * Most callers want `enqueueAll`; this one saves a transaction's round
   * trips on the embedded database's only session.
   */
  readonly enqueueFrom: <A extends object>(source: {
    readonly with: Statement.Fragment
    readonly input: Statement.Fragment
    readonly select: Statement.Fragment
  }) => Effect.Effect<ReadonlyArray<A>>
  /** Takes leases on due deliveries of `kind`; any process may call it. */
  readonly claim: (kind: DeliveryKind, options: ClaimOptions) => Effect.Effect<ReadonlyArray<Claimed>>
  /**
   * Records the attempt and its outcome. Only the lease holder can: answers
   * false when the lease was lost (expired and claimed elsewhere, or the
   * target was removed meanwhile).
   */
  readonly settle: (
    claimed: Claimed,
    outcome: Outcome,
    attempt: AttemptRecord,
    cooldown?: CooldownPolicy | undefined
  ) => Effect.Effect<boolean>
  /** `settle` of many deliveries, in order, in one statement (target health included). */
  readonly settleMany: (items: ReadonlyArray<SettleItem>) => Effect.Effect<Settled>
  /**
   * Gives claimed deliveries back unsent (a worker that took more than it
   * could start in time, or whose target began to cool down): waiting again,
   * the attempt not counted, nothing recorded. Answers how many it held.
   */
  readonly release: (claimed: ReadonlyArray<Claimed>) => Effect.Effect<number>
  /** Queues a `failed` delivery again, keeping its row and event id; respects the target's cooldown. */
  readonly replay: (input: ReplayInput) => Effect.Effect<{ readonly queued: true; readonly id: string }, ReplayError>
  /** The target's latest deliveries, newest first. */
  readonly list: (input: { readonly orgId: string; readonly kind: DeliveryKind; readonly targetId: string; readonly limit?: number | undefined }) => Effect.Effect<ReadonlyArray<Delivery>>
  readonly get: (input: { readonly orgId: string; readonly kind: DeliveryKind; readonly deliveryId: string }) => Effect.Effect<Option.Option<Delivery>>
  /** Every attempt of a delivery, oldest first. */
  readonly attempts: (deliveryId: string) => Effect.Effect<ReadonlyArray<Attempt>>
  /** Fails every undelivered delivery of the target with `reason` (target deleted or deactivated); answers how many. */
  readonly failUndelivered: (
    kind: DeliveryKind,
    targetId: string,
    reason: string,
    options?: { readonly except?: string | undefined }
  ) => Effect.Effect<number>
  /**
   * The target is gone (endpoint or destination deleted): `failUndelivered`
   * with `reason`, and its health record (failures, cooldown, count) is
   * dropped. Answers how many deliveries failed.
   */
  readonly removeTarget: (
    kind: DeliveryKind,
    targetId: string,
    reason: string,
    options?: { readonly dropPayloads?: boolean | undefined }
  ) => Effect.Effect<number>
  /** Sum of the integer `meta[key]` over the target's undelivered deliveries (e.g. spans waiting in batches). */
  readonly undeliveredMetaSum: (kind: DeliveryKind, targetId: string, key: string) => Effect.Effect<number>
  /** Forgets payloads no longer needed: of delivered or partial deliveries, and of failed ones finished over `keepFailedHours` ago (then no longer replayable). */
  readonly prunePayloads: (kind: DeliveryKind, keepFailedHours: number) => Effect.Effect<number>
  /** Deletes finished deliveries (and their attempts) older than `keepDays`. */
  readonly pruneFinished: (kind: DeliveryKind, keepDays: number) => Effect.Effect<number>
  /** How many deliveries of the target are still to be delivered. */
  readonly undelivered: (kind: DeliveryKind, targetId: string) => Effect.Effect<number>
  /** When the next delivery of `kind` becomes claimable (due, out of cooldown, or lease expired), if any is waiting. */
  readonly nextDue: (kind: DeliveryKind) => Effect.Effect<Option.Option<Date>>
  /**
   * Strict ordering of a target (`true`): its deliveries go one at a time, in
   * the order they were enqueued; one that keeps failing holds the ones behind
   * it until it is delivered or fails for good. `false` (the default): several
   * at once, in no promised order. Joins the caller's transaction, if any.
   */
  readonly setStrict: (kind: DeliveryKind, orgId: string, targetId: string, strict: boolean) => Effect.Effect<void>
  /** The target's cooldown end, if it is cooling down now. */
  readonly cooldownUntil: (targetId: string) => Effect.Effect<Option.Option<Date>>
  /** Whether the database answers now (a worker asks after a statement failed: unreachable, or refused?). */
  readonly reachable: Effect.Effect<boolean>
  /** Wakes this kind's workers here and (on a server) in other processes. Call after the enqueueing transaction commits. */
  readonly wake: (kind: DeliveryKind) => Effect.Effect<void>
}>()("svc/deliveries/DeliveryQueue") {
  static readonly layer = Layer.effect(
    DeliveryQueue,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const wakeups = yield* Wakeups
      const info = yield* DatabaseInfo

      // Each operation is a function of its module (one idea each); the
      // spans are opened here, named after this service.
      const enqueue = Effect.fn("DeliveryQueue.enqueue")(function*(input: EnqueueInput) {
        return yield* Enqueue.enqueue(sql, input)
      })
      const enqueueMany = Effect.fn("DeliveryQueue.enqueueMany")(function*(inputs: ReadonlyArray<EnqueueInput>) {
        return yield* Enqueue.enqueueMany(sql, inputs)
      })
      const enqueueAll = Effect.fn("DeliveryQueue.enqueueAll")(function*(inputs: ReadonlyArray<EnqueueInput>) {
        return yield* Enqueue.enqueueAll(sql, inputs)
      })
      const recordAttempted = Effect.fn("DeliveryQueue.recordAttempted")(function*(inputs: ReadonlyArray<AttemptedInput>) {
        return yield* Enqueue.recordAttempted(sql, inputs)
      })
      const enqueueFrom = <A extends object>(source: {
        readonly with: Statement.Fragment
        readonly input: Statement.Fragment
        readonly select: Statement.Fragment
      }) => Enqueue.enqueueFrom<A>(sql, source).pipe(Effect.withSpan("DeliveryQueue.enqueueFrom"))

      const claim = Effect.fn("DeliveryQueue.claim")(function*(kind: DeliveryKind, options: ClaimOptions) {
        return yield* Leases.claim(sql, kind, options)
      })
      const settleMany = Effect.fn("DeliveryQueue.settleMany")(function*(items: ReadonlyArray<SettleItem>) {
        return yield* Leases.settleMany(sql, items)
      })
      const settle = Effect.fn("DeliveryQueue.settle")(function*(
        claimed: Claimed,
        outcome: Outcome,
        attempt: AttemptRecord,
        cooldown?: CooldownPolicy
      ) {
        const { held } = yield* settleMany([{ claimed, outcome, attempt, cooldown }])
        return held[0] ?? false
      })
      const release = Effect.fn("DeliveryQueue.release")(function*(claimed: ReadonlyArray<Claimed>) {
        return yield* Leases.release(sql, claimed)
      })

      const replay = Effect.fn("DeliveryQueue.replay")(function*(input: ReplayInput) {
        const queued = yield* Replay.replay(sql, input)
        yield* wakeups.signal(wakeTopic(input.kind))
        return queued
      })

      const list = Effect.fn("DeliveryQueue.list")(function*(input: {
        readonly orgId: string
        readonly kind: DeliveryKind
        readonly targetId: string
        readonly limit?: number | undefined
      }) {
        return yield* Listing.list(sql, input)
      })
      const get = Effect.fn("DeliveryQueue.get")(function*(input: {
        readonly orgId: string
        readonly kind: DeliveryKind
        readonly deliveryId: string
      }) {
        return yield* Listing.get(sql, input)
      })
      const attempts = Effect.fn("DeliveryQueue.attempts")(function*(deliveryId: string) {
        return yield* Listing.attempts(sql, deliveryId)
      })
      const undeliveredMetaSum = Effect.fn("DeliveryQueue.undeliveredMetaSum")(function*(
        kind: DeliveryKind,
        targetId: string,
        key: string
      ) {
        return yield* Listing.undeliveredMetaSum(sql, kind, targetId, key)
      })
      const undelivered = Effect.fn("DeliveryQueue.undelivered")(function*(kind: DeliveryKind, targetId: string) {
        return yield* Listing.undelivered(sql, kind, targetId)
      })

      const failUndelivered = Effect.fn("DeliveryQueue.failUndelivered")(function*(
        kind: DeliveryKind,
        targetId: string,
        reason: string,
        options?: { readonly except?: string | undefined }
      ) {
        return yield* Targets.failUndelivered(sql, info, kind, targetId, reason, options)
      })
      const removeTarget = Effect.fn("DeliveryQueue.removeTarget")(function*(
        kind: DeliveryKind,
        targetId: string,
        reason: string,
        options?: { readonly dropPayloads?: boolean | undefined }
      ) {
        return yield* Targets.removeTarget(sql, info, kind, targetId, reason, options)
      })
      const setStrict = Effect.fn("DeliveryQueue.setStrict")(function*(
        kind: DeliveryKind,
        orgId: string,
        targetId: string,
        strict: boolean
      ) {
        return yield* Targets.setStrict(sql, kind, orgId, targetId, strict)
      })
      const cooldownUntil = Effect.fn("DeliveryQueue.cooldownUntil")(function*(targetId: string) {
        return yield* Targets.cooldownUntil(sql, targetId)
      })

      const prunePayloads = Effect.fn("DeliveryQueue.prunePayloads")(function*(kind: DeliveryKind, keepFailedHours: number) {
        return yield* Retention.prunePayloads(sql, kind, keepFailedHours)
      })
      const pruneFinished = Effect.fn("DeliveryQueue.pruneFinished")(function*(kind: DeliveryKind, keepDays: number) {
        return yield* Retention.pruneFinished(sql, kind, keepDays)
      })

      const nextDue = Effect.fn("DeliveryQueue.nextDue")(function*(kind: DeliveryKind) {
        const [row] = yield* nextDueStatement(sql, kind).pipe(Effect.orDie)
        return Option.fromNullishOr(row?.at ?? null)
      })

      return DeliveryQueue.of({
        enqueue,
        enqueueMany,
        enqueueAll,
        recordAttempted,
        enqueueFrom,
        claim,
        settle,
        settleMany,
        release,
        replay,
        list,
        get,
        attempts,
        failUndelivered,
        removeTarget,
        undeliveredMetaSum,
        prunePayloads,
        pruneFinished,
        undelivered,
        nextDue,
        setStrict,
        cooldownUntil,
        reachable: sql`SELECT 1`.pipe(Effect.as(true), Effect.timeoutOption("2 seconds"), Effect.map((answered) => answered._tag === "Some"), Effect.orElseSucceed(() => false)),
        wake: (kind) => wakeups.signal(wakeTopic(kind))
      })
    })
  )
}
