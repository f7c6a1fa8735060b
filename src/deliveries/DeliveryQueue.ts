/**
 * The shared delivery queue: webhook deliveries, reviewer emails and
 * telemetry batches are all "deliveries" to a target, kept in PostgreSQL
 * and claimed with leases, so any `svc` process may send them and none is
 * lost when a process dies. Only this folder writes the queue's tables and
 * knows its rules; capabilities map its statuses to their own API. Its
 * states and how a delivery travels through these files are in
 * `docs/architecture.md` ("Delivery engine").
 *
 * This file is the service: each operation is a function of the SQL client
 * in a file of one idea, and `make(sql, ...)` binds it and opens its span,
 * `DeliveryQueue.<operation>`; the service's shape is what `make` returns,
 * so a signature is written once, in its module.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, type Schema } from "effect"
import { DatabaseInfo } from "../database/Database.ts"
import { Topics, Wakeups } from "../database/Wakeups.ts"
import * as Enqueue from "./Enqueue.ts"
import * as Leases from "./Leases.ts"
import { makeLogLeases } from "./log/HeldLeases.ts"
import * as Listing from "./records/Listing.ts"
import * as Retention from "./records/Retention.ts"
import * as Search from "./records/Search.ts"
import * as Rows from "./Rows.ts"
import * as Replay from "./rows/Replay.ts"
import { nextDueStatement } from "./rows/Statements.ts"
import * as Targets from "./Targets.ts"

export * from "./Types.ts"
import type { AttemptRecord, Claimed, CooldownPolicy, DeliveryKind, Outcome, ReplayInput } from "./Types.ts"

/**
 * `f` bound to the SQL client (its first parameter), in a span named
 * `DeliveryQueue.<name>`. No stack trace per span: the name says where it
 * is, and one per settle batch was 0.7 % of svc's busy CPU in the webhook
 * drain (`bench/notes/webhook-sender.md`).
 */
const bind =
  <C>(client: C) =>
  <Args extends ReadonlyArray<unknown>, A, E>(name: string, f: (client: C, ...args: Args) => Effect.Effect<A, E>) =>
  (...args: Args): Effect.Effect<A, E> =>
    Effect.withSpan(f(client, ...args), `DeliveryQueue.${name}`, { captureStackTrace: false })

/** The queue's operations over one SQL client (the service is this, as a layer). */
export const make = (sql: PgClient.PgClient, wakeups: Wakeups["Service"], info: DatabaseInfo["Service"]) => {
  const op = bind(sql)
  const withInfo = bind({ sql, info })
  const log: Leases.LogContext = { sql, leases: makeLogLeases() }
  const withLog = bind(log)
  const settleMany = withLog("settleMany", Leases.settleMany)
  return {
    /** Adds a delivery (in the caller's transaction, if any). Past `capacity` it is recorded as `failed`, never dropped. */
    enqueue: op("enqueue", Enqueue.enqueue),
    /** `enqueue` of each input in order, in one statement (same capacity rule, same order of rows). */
    enqueueMany: op("enqueueMany", Enqueue.enqueueMany),
    /** `enqueueMany` without reading the new rows back (a fan-out of thousands need not parse them); answers how many. */
    enqueueAll: op("enqueueAll", Enqueue.enqueueAll),
    /** Stores deliveries whose first attempt was made before they were stored (`AttemptedInput`), in one statement. */
    recordAttempted: op("recordAttempted", Enqueue.recordAttempted),
    /**
     * `enqueueAll` of rows a query selects, in one statement with the
     * caller's own work (a fan-out that marks its source rows taken): `with`
     * adds the caller's common table expressions; `input` selects
     * `(ord, org_id, kind, target_id, label, event_id, payload, meta,
     * capacity)`, rows enqueued in `ord` order under the same capacity rule;
     * `select` is the statement's result, which may read `inserted(kind, status)`,
     * its rows decoded by `row` (`table` names them when one does not decode).
     * Most callers want `enqueueAll`; this one saves a transaction's round
     * trips on the embedded database's only session.
     */
    enqueueFrom: <S extends Schema.Constraint & { readonly DecodingServices: never }>(
      source: Enqueue.EnqueueSource,
      table: string,
      row: S
    ) => Enqueue.enqueueFrom(sql, source, table, row).pipe(Effect.withSpan("DeliveryQueue.enqueueFrom")),
    /** Takes leases on due deliveries of `kind`; any process may call it. */
    claim: withLog("claim", Leases.claim),
    /** `claim`, and when it took nothing, when the next delivery becomes claimable (`nextDue`), in the same statement. */
    claimOrNextDue: withLog("claim", Leases.claimOrNextDue),
    /**
     * Records the attempt and its outcome. Only the lease holder can: answers
     * false when the lease was lost (expired and claimed elsewhere, or the
     * target was removed meanwhile).
     */
    settle: (claimed: Claimed, outcome: Outcome, attempt: AttemptRecord, cooldown?: CooldownPolicy | undefined) =>
      Effect.map(settleMany([{ claimed, outcome, attempt, cooldown }]), ({ held }) => held[0] ?? false).pipe(
        Effect.withSpan("DeliveryQueue.settle")
      ),
    /** `settle` of many deliveries, in order, in one statement (target health included). */
    settleMany,
    /**
     * Gives claimed deliveries back unsent (a worker that took more than it
     * could start in time, or whose target began to cool down): waiting again,
     * the attempt not counted, nothing recorded. Answers how many it held.
     */
    release: withLog("release", Leases.release),
    /** Queues a `failed` delivery again, keeping its row and event id; respects the target's cooldown. Wakes the kind's workers. */
    replay: op(
      "replay",
      (sql, input: ReplayInput) =>
        Effect.tap(Replay.replay(sql, input), () => wakeups.signal(Topics.deliveries(input.kind)))
    ),
    /** The target's latest deliveries, newest first. */
    list: op("list", Listing.list),
    /**
     * A page of a target's or an organization's deliveries matching every
     * filter, newest first, and the cursor of the next (`records/Search.ts`).
     */
    searchPage: op("searchPage", Search.searchPage),
    get: op("get", Listing.get),
    /** Every attempt of a delivery, oldest first. */
    attempts: op("attempts", Listing.attempts),
    /** Fails every undelivered delivery of the target with `reason` (target deleted or deactivated); answers how many. */
    failUndelivered: withInfo("failUndelivered", Targets.failUndelivered),
    /**
     * The target is gone (endpoint or destination deleted): `failUndelivered`
     * with `reason`, and its health record (failures, cooldown, count) is
     * dropped. Answers how many deliveries failed.
     */
    removeTarget: withInfo("removeTarget", Targets.removeTarget),
    /** Sum of the integer `meta[key]` over the target's undelivered deliveries (e.g. spans waiting in batches). */
    undeliveredMetaSum: op("undeliveredMetaSum", Listing.undeliveredMetaSum),
    /** Forgets payloads no longer needed: of delivered or partial deliveries, and of failed ones finished over `keepFailedHours` ago (then no longer replayable). */
    prunePayloads: op("prunePayloads", Retention.prunePayloads),
    /** Deletes finished deliveries (and their attempts) older than `keepDays`. */
    pruneFinished: op("pruneFinished", Retention.pruneFinished),
    /** How many deliveries of the target are still to be delivered. */
    undelivered: op("undelivered", Listing.undelivered),
    /** When the next delivery of `kind` becomes claimable (due, out of cooldown, or lease expired), if any is waiting. */
    nextDue: op(
      "nextDue",
      (sql, kind: DeliveryKind) =>
        Effect.map(
          Effect.orDie(Rows.nextDue(nextDueStatement(sql, kind, log.leases.owner()))),
          ([row]) => Option.fromNullishOr(row?.at ?? null)
        )
    ),
    /**
     * Strict ordering of a target (`true`): its deliveries go one at a time, in
     * the order they were enqueued; one that keeps failing holds the ones behind
     * it until it is delivered or fails for good. `false` (the default): several
     * at once, in no promised order. Joins the caller's transaction, if any.
     */
    setStrict: op("setStrict", Targets.setStrict),
    /**
     * At most `perSecond` deliveries of the target per second (null:
     * unlimited), across processes: the claims consume a bucket kept on the
     * target's row (`Targets.ts`). Joins the caller's transaction, if any.
     */
    setRateLimit: op("setRateLimit", Targets.setRateLimit),
    /**
     * Targets sharing `group` share a bound in the worker (webhook endpoints
     * of one organization on one host: `SVC_WEBHOOK_PER_HOST`); every claim
     * answers it with the deliveries it hands out. Joins the caller's transaction, if any.
     */
    setGroup: op("setGroup", Targets.setGroup),
    /** The target's cooldown end, if it is cooling down now. */
    cooldownUntil: op("cooldownUntil", Targets.cooldownUntil),
    /** Whether the database answers now (a worker asks after a statement failed: unreachable, or refused?). */
    reachable: sql`SELECT 1`.pipe(
      Effect.timeout("2 seconds"),
      Effect.as(true),
      Effect.orElseSucceed(() => false)
    ),
    /** Wakes this kind's workers here and (on a server) in other processes. Call after the enqueueing transaction commits. */
    wake: (kind: DeliveryKind) => wakeups.signal(Topics.deliveries(kind))
  }
}

export class DeliveryQueue
  extends Context.Service<DeliveryQueue, ReturnType<typeof make>>()("svc/deliveries/DeliveryQueue")
{
  static readonly layer = Layer.effect(
    DeliveryQueue,
    Effect.gen(function*() {
      return make(yield* PgClient.PgClient, yield* Wakeups, yield* DatabaseInfo)
    })
  )
}
