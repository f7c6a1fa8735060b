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
 * target's undelivered count, kept by triggers (migration 0401), which the
 * capacity rule reads instead of counting the queue. The queue is the only
 * place that knows these rules; capabilities map statuses to their own API.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Layer, Option } from "effect"
import type { Statement } from "effect/sql"
import { DeliveryNotFound, DeliveryNotReplayable, DeliveryQueueFull, type ReplayError } from "./Errors.ts"
import { newId } from "../platform/Ids.ts"
import { DatabaseInfo } from "../platform/Database.ts"
import { Topics, Wakeups } from "../platform/Wakeups.ts"
import { claimStatement, nextDueStatement, settleStatement } from "./Statements.ts"

export * from "./Types.ts"
import {
  type AttemptRecord,
  type Claimed,
  type Attempt,
  type ClaimOptions,
  COLUMNS,
  type CooldownPolicy,
  type Delivery,
  type DeliveryKind,
  type DeliveryStatus,
  type EnqueueInput,
  type Outcome,
  type ReplayInput,
  type Row,
  type Settled,
  type SettleItem,
  toDelivery,
  UNDELIVERED
} from "./Types.ts"

/** `Wakeups` topic of a kind's workers. */
export const wakeTopic = (kind: DeliveryKind) => Topics.deliveries(kind)

const millis = (input: Duration.Input) => Duration.toMillis(input)

/** Order of two `seq`s (decimal bigint text, no sign or leading zeros) without parsing them. */
const compareSeq = (a: string, b: string) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0)

export class DeliveryQueue extends Context.Service<DeliveryQueue, {
  /** Adds a delivery (in the caller's transaction, if any). Past `capacity` it is recorded as `failed`, never dropped. */
  readonly enqueue: (input: EnqueueInput) => Effect.Effect<Delivery>
  /** `enqueue` of each input in order, in one statement (same capacity rule, same order of rows). */
  readonly enqueueMany: (inputs: ReadonlyArray<EnqueueInput>) => Effect.Effect<ReadonlyArray<Delivery>>
  /** `enqueueMany` without reading the new rows back (a fan-out of thousands need not parse them); answers how many. */
  readonly enqueueAll: (inputs: ReadonlyArray<EnqueueInput>) => Effect.Effect<number>
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

      // Lock order. A statement that changes both deliveries and their
      // targets' rows (health, and the count the triggers keep) takes the
      // target rows first, in id order, then the deliveries: otherwise two
      // processes settling overlapping targets, or a settle beside an
      // endpoint's deletion, can deadlock, and an aborted settle means the
      // deliveries are sent again once their leases run out. Enqueueing
      // locks no existing delivery and its trigger takes targets in id
      // order; claims and releases leave the counts alone. PGlite is one
      // session, where nothing waits for a lock: there the extra statement
      // and transaction are skipped.
      const targetsFirst = <A, R>(targetIds: ReadonlyArray<string>, effect: Effect.Effect<A, never, R>) =>
        info.kind !== "server" || targetIds.length === 0
          ? effect
          : sql.withTransaction(Effect.gen(function*() {
            const ordered = [...new Set(targetIds)].sort()
            yield* sql`SELECT id FROM delivery_targets WHERE id IN ${sql.in(ordered)} ORDER BY id FOR UPDATE`
            return yield* effect
          })).pipe(Effect.orDie)
      const undeliveredList = sql.in(UNDELIVERED as Array<string>)

      const enqueue = Effect.fn("DeliveryQueue.enqueue")(function*(input: EnqueueInput) {
        // `undelivered` is kept by triggers (migration 0401): one row read, however long the queue.
        const [row] = yield* sql<Row>`
          WITH waiting AS (
            SELECT coalesce((SELECT undelivered FROM delivery_targets WHERE id = ${input.targetId}), 0) AS n
          )
          INSERT INTO deliveries (id, org_id, kind, target_id, status, label, event_id, payload, meta, last_error, finished_at)
          SELECT ${newId()}, ${input.orgId}, ${input.kind}, ${input.targetId},
                 CASE WHEN waiting.n >= ${input.capacity} THEN 'failed' ELSE 'queued' END,
                 ${input.label ?? null}, ${input.eventId ?? null}, ${input.payload ?? null}, ${sql.json(input.meta ?? {})},
                 CASE WHEN waiting.n >= ${input.capacity}
                   THEN ${`queue full: the target already has ${input.capacity} undelivered deliveries`} END,
                 CASE WHEN waiting.n >= ${input.capacity} THEN now() END
          FROM waiting
          RETURNING ${sql.literal(COLUMNS)}
        `.pipe(Effect.orDie)
        return toDelivery(row!)
      })

      // With `readBack` the new rows in input order; without, one row with their number.
      const insertMany = Effect.fnUntraced(function*(inputs: ReadonlyArray<EnqueueInput>, readBack: boolean) {
        if (inputs.length === 0) return []
        const rows = inputs.map((input, ord) => ({
          ord,
          id: newId(),
          org_id: input.orgId,
          kind: input.kind,
          target_id: input.targetId,
          label: input.label ?? null,
          event_id: input.eventId ?? null,
          payload: input.payload ?? null,
          meta: input.meta ?? {},
          capacity: input.capacity
        }))
        // Row k of a target in this batch finds (undelivered before) + (k - 1)
        // ahead of it: the same answer k single enqueues would give.
        const inserted = yield* sql<Partial<Row> & { readonly n?: number }>`
          WITH input AS (
            SELECT * FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS x(
              ord int, id uuid, org_id uuid, kind text, target_id uuid, label text, event_id uuid,
              payload text, meta jsonb, capacity int)
          ),
          waiting AS (
            SELECT t.target_id, coalesce(c.undelivered, 0) AS n
            FROM (SELECT DISTINCT target_id FROM input) t
            LEFT JOIN delivery_targets c ON c.id = t.target_id
          ),
          ranked AS (
            SELECT i.*, w.n + row_number() OVER (PARTITION BY i.target_id ORDER BY i.ord) AS position
            FROM input i JOIN waiting w ON w.target_id = i.target_id
          ),
          inserted AS (
            INSERT INTO deliveries (id, org_id, kind, target_id, status, label, event_id, payload, meta, last_error, finished_at)
            SELECT id, org_id, kind, target_id,
                   CASE WHEN position > capacity THEN 'failed' ELSE 'queued' END,
                   label, event_id, payload, coalesce(meta, '{}'::jsonb),
                   CASE WHEN position > capacity
                     THEN 'queue full: the target already has ' || capacity || ' undelivered deliveries' END,
                   CASE WHEN position > capacity THEN now() END
            FROM ranked ORDER BY ord
            RETURNING ${sql.literal(readBack ? COLUMNS : "id")}
          )
          ${readBack
            ? sql`SELECT inserted.*, input.ord FROM inserted JOIN input ON input.id = inserted.id ORDER BY input.ord`
            : sql`SELECT count(*)::int AS n FROM inserted`}
        `.pipe(Effect.orDie)
        return inserted
      })
      const enqueueMany = Effect.fn("DeliveryQueue.enqueueMany")(function*(inputs: ReadonlyArray<EnqueueInput>) {
        return (yield* insertMany(inputs, true)).map((row) => toDelivery(row as Row))
      })
      const enqueueAll = Effect.fn("DeliveryQueue.enqueueAll")(function*(inputs: ReadonlyArray<EnqueueInput>) {
        const [counted] = yield* insertMany(inputs, false)
        return counted?.n ?? 0
      })

      const enqueueFrom = <A extends object>(source: {
        readonly with: Statement.Fragment
        readonly input: Statement.Fragment
        readonly select: Statement.Fragment
      }) =>
        sql<A>`
          WITH ${source.with},
          input AS (${source.input}),
          waiting AS (
            SELECT t.target_id, coalesce(c.undelivered, 0) AS n
            FROM (SELECT DISTINCT target_id FROM input) t
            LEFT JOIN delivery_targets c ON c.id = t.target_id
          ),
          ranked AS (
            SELECT i.*, w.n + row_number() OVER (PARTITION BY i.target_id ORDER BY i.ord) AS position
            FROM input i JOIN waiting w ON w.target_id = i.target_id
          ),
          inserted AS (
            INSERT INTO deliveries (id, org_id, kind, target_id, status, label, event_id, payload, meta, last_error, finished_at)
            SELECT gen_random_uuid(), org_id, kind, target_id,
                   CASE WHEN position > capacity THEN 'failed' ELSE 'queued' END,
                   label, event_id, payload, coalesce(meta, '{}'::jsonb),
                   CASE WHEN position > capacity
                     THEN 'queue full: the target already has ' || capacity || ' undelivered deliveries' END,
                   CASE WHEN position > capacity THEN now() END
            FROM ranked ORDER BY ord
            RETURNING kind
          )
          ${source.select}
        `.pipe(Effect.orDie, Effect.withSpan("DeliveryQueue.enqueueFrom"))

      // Claimable: due queued/retrying rows, or sending rows whose lease
      // expired, of targets not cooling down, at most `perTarget` per target
      // counting leases already live (one busy target never takes every
      // slot). Index-driven so a claim costs O(targets + claimed), not
      // O(queue length): distinct waiting targets come from a skip scan of
      // `deliveries_waiting_idx`, each target's next rows from a range scan
      // of the same index.
      const claim = Effect.fn("DeliveryQueue.claim")(function*(kind: DeliveryKind, options: ClaimOptions) {
        const rows = yield* claimStatement(sql, kind, options, newId()).pipe(Effect.orDie)
        return rows
          .map((row): Claimed => ({
            ...toDelivery(row),
            leaseOwner: row.lease_owner,
            targetFailures: row.target_failures,
            claimedFrom: row.claimed_from
          }))
          .sort((a, b) => a.nextAttemptAt.getTime() - b.nextAttemptAt.getTime() || compareSeq(a.seq, b.seq))
      })

      const statusOf = (outcome: Outcome): DeliveryStatus =>
        outcome._tag === "Delivered"
          ? "delivered"
          : outcome._tag === "Partial"
          ? "partial"
          : outcome._tag === "Retry"
          ? "retrying"
          : "failed"

      // One statement per batch: each delivery's row update, its attempt
      // record, and the health of every target in the batch (see `health`).
      const settleMany = Effect.fn("DeliveryQueue.settleMany")(function*(
        items: ReadonlyArray<SettleItem>
      ) {
        if (items.length === 0) return { held: [], coolingUntil: new Map<string, Date>() } satisfies Settled
        const rows = items.map(({ attempt, claimed, cooldown, outcome }, ord) => ({
          ord,
          id: claimed.id,
          lease_owner: claimed.leaseOwner,
          target_id: claimed.targetId,
          status: statusOf(outcome),
          last_error: outcome._tag === "Delivered" ? null : outcome.error,
          meta: outcome.meta ?? {},
          next_attempt_at: outcome._tag === "Retry" ? outcome.at.toISOString() : null,
          finished: outcome._tag !== "Retry",
          failed_attempt: outcome._tag === "Retry" || outcome._tag === "Failed",
          cooldown_after: cooldown?.after ?? null,
          cooldown_base: cooldown === undefined ? null : millis(cooldown.base) / 1000,
          cooldown_cap: cooldown === undefined ? null : millis(cooldown.cap) / 1000,
          status_code: attempt.statusCode ?? null,
          error: attempt.error ?? null,
          snippet: attempt.responseSnippet ?? null,
          duration_ms: Math.max(0, Math.round(attempt.durationMs))
        }))
        const targetIds = [...new Set(items.map((item) => item.claimed.targetId))].sort()
        const settled = yield* settleStatement(sql, JSON.stringify(rows), targetIds).pipe(Effect.orDie)
        // Keyed by lease, not only by delivery: one batch may hold the same
        // delivery twice (a lease that ran out while its send was still in
        // flight, and the claim that took it over); only the holder's counts.
        const held = new Set(settled.map((row) => `${row.delivery_id}:${row.lease_owner}`))
        const coolingUntil = new Map<string, Date>()
        for (const row of settled) {
          if (row.cooldown_until !== null && row.cooldown_until.getTime() > Date.now()) {
            coolingUntil.set(row.target_id, row.cooldown_until)
          }
        }
        return {
          held: items.map((item) => held.has(`${item.claimed.id}:${item.claimed.leaseOwner}`)),
          coolingUntil
        } satisfies Settled
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

      // Back to waiting, as if never claimed: the attempt is not counted and
      // nothing is recorded. Only the lease holder can.
      const release = Effect.fn("DeliveryQueue.release")(function*(claimed: ReadonlyArray<Claimed>) {
        if (claimed.length === 0) return 0
        const rows = claimed.map((c) => ({ id: c.id, lease_owner: c.leaseOwner, status: c.claimedFrom }))
        const released = yield* sql<{ id: string }>`
          UPDATE deliveries d
          SET status = CASE WHEN i.status IN ('queued', 'retrying') THEN i.status
                            WHEN d.attempts > 1 THEN 'retrying' ELSE 'queued' END,
              attempts = greatest(0, d.attempts - 1), lease_owner = NULL, lease_until = NULL
          FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS i(id uuid, lease_owner uuid, status text)
          WHERE d.id = i.id AND d.lease_owner = i.lease_owner AND d.status = 'sending'
          RETURNING d.id
        `.pipe(Effect.orDie)
        return released.length
      })

      const replay = Effect.fn("DeliveryQueue.replay")(function*(input: ReplayInput) {
        const result = yield* sql.withTransaction(Effect.gen(function*() {
          const [row] = yield* sql<Row & { readonly cooldown_until: Date | null }>`
            SELECT ${sql.literal(COLUMNS.split(",").map((c) => `d.${c.trim()}`).join(", "))}, t.cooldown_until
            FROM deliveries d LEFT JOIN delivery_targets t ON t.id = d.target_id
            WHERE d.id = ${input.deliveryId} AND d.org_id = ${input.orgId} AND d.kind = ${input.kind}
            ${input.targetId === undefined ? sql`` : sql`AND d.target_id = ${input.targetId}`}
            FOR UPDATE OF d
          `
          if (row === undefined) return { _tag: "NotFound" } as const
          const delivery = toDelivery(row)
          if (delivery.status !== "failed" || (input.replayable !== undefined && !input.replayable(delivery))) {
            return { _tag: "NotReplayable", status: delivery.status } as const
          }
          const [waiting] = yield* sql<{ n: number }>`
            SELECT coalesce((SELECT undelivered FROM delivery_targets WHERE id = ${delivery.targetId}), 0) AS n
          `
          if (waiting!.n >= input.capacity) return { _tag: "QueueFull" } as const
          yield* sql`
            UPDATE deliveries
            SET status = 'queued', replays = replays + 1, finished_at = NULL, lease_owner = NULL, lease_until = NULL,
                next_attempt_at = greatest(now(), coalesce(${row.cooldown_until}::timestamptz, now()))
            WHERE id = ${delivery.id}
          `
          return { _tag: "Queued", id: delivery.id } as const
        })).pipe(Effect.orDie)
        switch (result._tag) {
          case "NotFound":
            return yield* new DeliveryNotFound({ deliveryId: input.deliveryId })
          case "NotReplayable":
            return yield* new DeliveryNotReplayable({ deliveryId: input.deliveryId, status: result.status })
          case "QueueFull":
            return yield* new DeliveryQueueFull({ targetId: input.targetId ?? "" })
          case "Queued":
            yield* wakeups.signal(wakeTopic(input.kind))
            return { queued: true as const, id: result.id }
        }
      })

      const list = Effect.fn("DeliveryQueue.list")(function*(input: {
        readonly orgId: string
        readonly kind: DeliveryKind
        readonly targetId: string
        readonly limit?: number | undefined
      }) {
        const rows = yield* sql<Row>`
          SELECT ${sql.literal(COLUMNS)} FROM deliveries
          WHERE target_id = ${input.targetId} AND org_id = ${input.orgId} AND kind = ${input.kind}
          ORDER BY seq DESC LIMIT ${input.limit ?? 50}
        `.pipe(Effect.orDie)
        return rows.map(toDelivery)
      })

      const get = Effect.fn("DeliveryQueue.get")(function*(input: {
        readonly orgId: string
        readonly kind: DeliveryKind
        readonly deliveryId: string
      }) {
        const [row] = yield* sql<Row>`
          SELECT ${sql.literal(COLUMNS)} FROM deliveries
          WHERE id = ${input.deliveryId} AND org_id = ${input.orgId} AND kind = ${input.kind}
        `.pipe(Effect.orDie)
        return Option.map(Option.fromNullishOr(row), toDelivery)
      })

      const attempts = Effect.fn("DeliveryQueue.attempts")(function*(deliveryId: string) {
        const rows = yield* sql<{
          attempt: number
          at: Date
          status_code: number | null
          error: string | null
          response_snippet: string | null
          duration_ms: number
        }>`
          SELECT attempt, at, status_code, error, response_snippet, duration_ms FROM delivery_attempts
          WHERE delivery_id = ${deliveryId} ORDER BY attempt
        `.pipe(Effect.orDie)
        return rows.map((row): Attempt => ({
          attempt: row.attempt,
          at: row.at,
          statusCode: row.status_code,
          error: row.error,
          responseSnippet: row.response_snippet,
          durationMs: row.duration_ms
        }))
      })

      // `sending` rows are failed too: their settle then finds the lease gone
      // (a request already in flight may still arrive, as the spec allows).
      // The target's undelivered rows as failed with `reason`, answering their
      // ids; `except`: the delivery whose handler decided this (it settles itself).
      const failTargetUndelivered = (kind: DeliveryKind, targetId: string, reason: string, except?: string) => sql`
        UPDATE deliveries
        SET status = 'failed', last_error = ${reason}, finished_at = now(), lease_owner = NULL, lease_until = NULL
        WHERE kind = ${kind} AND target_id = ${targetId} AND status IN ${undeliveredList}
        ${except === undefined ? sql`` : sql`AND id <> ${except}`}
        RETURNING id
      `

      const failUndelivered = Effect.fn("DeliveryQueue.failUndelivered")(function*(
        kind: DeliveryKind,
        targetId: string,
        reason: string,
        options?: { readonly except?: string | undefined }
      ) {
        const rows = yield* targetsFirst(
          [targetId],
          sql<{ id: string }>`${failTargetUndelivered(kind, targetId, reason, options?.except)}`.pipe(Effect.orDie)
        )
        return rows.length
      })

      // One statement: the count trigger then finds the target row gone and
      // leaves it gone.
      const removeTarget = Effect.fn("DeliveryQueue.removeTarget")(function*(
        kind: DeliveryKind,
        targetId: string,
        reason: string,
        options?: { readonly dropPayloads?: boolean | undefined }
      ) {
        const [row] = yield* targetsFirst([targetId], sql<{ n: number }>`
          WITH failed AS (${failTargetUndelivered(kind, targetId, reason)}),
          forgotten AS (
            DELETE FROM delivery_targets WHERE id = ${targetId} AND kind = ${kind} RETURNING id
          )
          SELECT (SELECT count(*)::int FROM failed) AS n, (SELECT count(*) FROM forgotten) AS forgotten
        `.pipe(Effect.orDie))
        // Nothing of the target can be sent any more: its payloads go too.
        if (options?.dropPayloads === true) {
          yield* sql`
            UPDATE deliveries SET payload = NULL
            WHERE kind = ${kind} AND target_id = ${targetId} AND payload IS NOT NULL
          `.pipe(Effect.orDie)
        }
        return row!.n
      })

      const undeliveredMetaSum = Effect.fn("DeliveryQueue.undeliveredMetaSum")(function*(
        kind: DeliveryKind,
        targetId: string,
        key: string
      ) {
        const [row] = yield* sql<{ n: number }>`
          SELECT coalesce(sum((meta->>${key})::int), 0)::int AS n FROM deliveries
          WHERE kind = ${kind} AND target_id = ${targetId} AND status IN ${undeliveredList}
        `.pipe(Effect.orDie)
        return row?.n ?? 0
      })

      const prunePayloads = Effect.fn("DeliveryQueue.prunePayloads")(function*(kind: DeliveryKind, keepFailedHours: number) {
        const rows = yield* sql<{ id: string }>`
          UPDATE deliveries SET payload = NULL
          WHERE kind = ${kind} AND payload IS NOT NULL AND (
            status IN ('delivered', 'partial')
            OR (status = 'failed' AND finished_at < now() - make_interval(hours => ${keepFailedHours}))
          )
          RETURNING id
        `.pipe(Effect.orDie)
        return rows.length
      })

      const pruneFinished = Effect.fn("DeliveryQueue.pruneFinished")(function*(kind: DeliveryKind, keepDays: number) {
        const rows = yield* sql<{ id: string }>`
          DELETE FROM deliveries
          WHERE kind = ${kind} AND finished_at < now() - make_interval(days => ${keepDays})
          RETURNING id
        `.pipe(Effect.orDie)
        return rows.length
      })

      const undelivered = Effect.fn("DeliveryQueue.undelivered")(function*(kind: DeliveryKind, targetId: string) {
        const [row] = yield* sql<{ n: number }>`
          SELECT count(*)::int AS n FROM deliveries
          WHERE kind = ${kind} AND target_id = ${targetId} AND status IN ${undeliveredList}
        `.pipe(Effect.orDie)
        return row!.n
      })

      const nextDue = Effect.fn("DeliveryQueue.nextDue")(function*(kind: DeliveryKind) {
        const [row] = yield* nextDueStatement(sql, kind).pipe(Effect.orDie)
        return Option.fromNullishOr(row?.at ?? null)
      })

      const cooldownUntil = Effect.fn("DeliveryQueue.cooldownUntil")(function*(targetId: string) {
        const [row] = yield* sql<{ cooldown_until: Date | null }>`
          SELECT cooldown_until FROM delivery_targets WHERE id = ${targetId} AND cooldown_until > now()
        `.pipe(Effect.orDie)
        return Option.fromNullishOr(row?.cooldown_until ?? null)
      })

      return DeliveryQueue.of({
        enqueue,
        enqueueMany,
        enqueueAll,
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
        cooldownUntil,
        reachable: sql`SELECT 1`.pipe(Effect.as(true), Effect.timeoutOption("2 seconds"), Effect.map((answered) => answered._tag === "Some"), Effect.orElseSucceed(() => false)),
        wake: (kind) => wakeups.signal(wakeTopic(kind))
      })
    })
  )
}
