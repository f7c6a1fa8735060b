/**
 * The background half of telemetry export, one set of fibers per process:
 *
 * - refresh: which organizations have a destination (the database's view;
 *   in-process creates and deletes apply at once, other processes' within
 *   `REFRESH_EVERY`);
 * - flush: at least every `FLUSH_EVERY` (at once when a buffer holds a full
 *   batch) each buffer becomes batches of at most 512 spans, gzipped. Each
 *   is sent from memory at once (at most `MEMORY_SENDS` per destination in
 *   flight; while they are all taken the spans stay in the buffer, and the
 *   next free slot starts a round): a batch the collector takes leaves only
 *   its delivery record (no payload; the records of a destination's batches
 *   taken within a second are written by one statement); one that fails is
 *   stored sealed in the shared queue, `retrying` (retryable) or `failed`
 *   (kept for a replay). While the destination has batches in the queue,
 *   and at shutdown, batches go to the queue sealed, as `telemetry`
 *   deliveries. When the destination already has
 *   `SVC_TELEMETRY_QUEUE_BATCHES` undelivered batches (a collector that is
 *   down or hangs), the spans are dropped and counted instead;
 * - send: the shared delivery worker claims queued batches (any process
 *   may) and exports them, retrying 429/502/503/504 and network failures
 *   with backoff and `Retry-After`, at most `MAX_ATTEMPTS` times per round
 *   (a first attempt from memory counts);
 * - prune: payloads of delivered and partial batches are forgotten, failed
 *   ones after `KEEP_FAILED_HOURS`; finished records after `KEEP_RECORDS_DAYS`.
 *
 * None of this work belongs to an organization, so none of its spans is
 * exported (which would feed export with its own spans).
 */
import { Clock, Duration, Effect, FiberSet, Latch, Layer, Option, Redacted } from "effect"
import { type Claimed, DeliveryQueue, Outcome } from "../deliveries/DeliveryQueue.ts"
import { runWorker, type Settlement } from "../deliveries/DeliveryWorker.ts"
import { Metrics } from "../observability/Metrics.ts"
import type { OutboundHttp } from "../outbound/OutboundHttp.ts"
import { SvcConfig } from "../platform/Config.ts"
import { doubling, jittered } from "../platform/Backoff.ts"
import { SecretBox } from "../platform/Crypto.ts"
import { FLUSH_EVERY, SpanBuffers } from "./Buffers.ts"
import { type CollectorTarget, compressBatch, type ExportResult, exportBody, type StoredBody } from "./Collector.ts"
import { batchContext, KEEP_FAILED_HOURS, KEEP_RECORDS_DAYS, TelemetryDestinations } from "./Destinations.ts"
import { DestinationsRepo } from "./Repository.ts"

export { FLUSH_EVERY }
export const REFRESH_EVERY = Duration.seconds(5)
export const PRUNE_EVERY = Duration.minutes(1)
const SHUTDOWN_FLUSH = Duration.seconds(3)
/** Attempts per round (a replay starts a new round). */
export const MAX_ATTEMPTS = 5
const BACKOFF_BASE_MS = 1000
const BACKOFF_CAP_MS = 30_000
const SUCCESS_WRITE_MS = 1000
/** How long the records of batches the collector took wait to be written together. */
const RECORD_EVERY = Duration.seconds(1)
/** Batches of one destination sent from memory at once by this process; more wait in memory for a slot. */
export const MEMORY_SENDS = 4
/** How long a read of "nothing of the destination waits in the queue" is trusted. */
const QUEUE_EMPTY_FRESH_MS = 1000

/**
 * Which attempt of its round a claimed batch is on. A round begins at
 * enqueue (`round_start` 0) and again at each replay: every failure records
 * `round_start` = the attempts made so far, so a replay gets a full
 * `MAX_ATTEMPTS` whether the batch failed after one attempt (a 400) or after
 * exhausting its retries. (Rows without it: the old `replays` arithmetic.)
 */
export const attemptInRound = (delivery: Pick<Claimed, "attempts" | "replays" | "meta">): number => {
  const start = Number(delivery.meta.round_start)
  return delivery.attempts - (Number.isFinite(start) ? start : MAX_ATTEMPTS * delivery.replays)
}

/** Delay before retry `n` (1 = after the first attempt): 1 s, 2 s, 4 s... at most 30 s, ±20 % jitter. */
export const backoff = (n: number, random: number = Math.random()): Duration.Duration => {
  return Duration.millis(jittered(doubling(n, BACKOFF_BASE_MS, BACKOFF_CAP_MS), 0.2, random))
}

/** A batch sent from memory that the collector took, waiting for its record. */
interface Taken {
  readonly orgId: string
  readonly status: "delivered" | "partial"
  readonly meta: Readonly<Record<string, string | number>>
  readonly error: string | null
  /** Whether it updates the destination's `last_delivered_at` and `last_error`. */
  readonly touch: boolean
  readonly spans: number
}

/** What started a flush round: a buffer's batch filling up, or the period. */
type Round = "full" | "period"

/** A batch cut and compressed, waiting in memory for a send slot (its spans are counted as sending). */
interface Ready {
  readonly orgId: string
  readonly body: StoredBody
  readonly spanCount: number
}

export const TelemetryExportLive = Layer.effectDiscard(Effect.gen(function*() {
  const buffers = yield* SpanBuffers
  const repo = yield* DestinationsRepo
  const destinations = yield* TelemetryDestinations
  const queue = yield* DeliveryQueue
  const box = yield* SecretBox
  const config = yield* SvcConfig
  const metrics = yield* Metrics
  const queueBatches = config.telemetryQueueBatches

  const refresh = Effect.gen(function*() {
    const rows = yield* repo.active()
    buffers.sync(rows.map((row) => ({ orgId: row.org_id, destinationId: row.id })))
  })

  // Collectors by destination id. A destination's URL and headers never
  // change (there is no update: a new collector is a new destination, a new
  // id), so an entry stays right for as long as the destination exists. It
  // is used only while this process buffers for the destination, which
  // stops at once on a delete here and at the next refresh (the database's
  // view, `REFRESH_EVERY`) on a delete in another process; the refresh then
  // drops entries of destinations that are gone. A batch of a destination
  // this process does not buffer for is looked up each time.
  const targets = new Map<string, Option.Option<CollectorTarget>>()
  const targetOf = (id: string) =>
    Effect.gen(function*() {
      const cached = targets.get(id)
      if (cached !== undefined && buffers.isActive(id)) return cached
      const target = yield* destinations.target(id)
      if (buffers.isActive(id)) targets.set(id, target)
      return target
    })
  const lastSuccess = new Map<string, number>()
  /** Whether this success should update the destination row (a run of successes does so at most once a second). */
  const touchOnSuccess = (id: string, error: string | null, now: number) => {
    const previous = lastSuccess.get(id)
    if (error === null && previous !== undefined && now - previous < SUCCESS_WRITE_MS) return false
    lastSuccess.set(id, now)
    return true
  }
  const recordSuccess = (id: string, error: string | null) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => touchOnSuccess(id, error, now) ? repo.recordSuccess(id, error) : Effect.void)
  const recordError = (id: string, error: string) =>
    Effect.suspend(() => {
      lastSuccess.delete(id)
      // Successes from memory waiting for their records come first: `last_error` follows the latest outcome.
      return Effect.andThen(writeRecordsOf(id), repo.recordError(id, error))
    })

  const seal = (destinationId: string, body: StoredBody) =>
    box.seal(Buffer.from(body.gzipped).toString("base64"), batchContext(destinationId))

  /** Delay before the next attempt after a retryable answer to attempt `round`. */
  const retryDelay = (round: number, result: Extract<ExportResult, { _tag: "Retryable" }>) =>
    Math.max(
      Duration.toMillis(backoff(round)),
      result.retryAfter === undefined ? 0 : Duration.toMillis(result.retryAfter)
    )

  // Batches sent from memory, per destination, in this process.
  const memorySends = yield* FiberSet.make<void>()
  const inFlight = new Map<string, number>()
  // Batches cut and gzipped while every slot was taken, per destination:
  // ~40 bytes a span instead of its text. A send that ends well starts the
  // next (no round, no statement); one that fails leaves them to the next
  // round, which finds the destination's batches in the queue and moves
  // them there. They count against `SVC_TELEMETRY_QUEUE_BATCHES` like
  // queued ones.
  const ready = new Map<string, Array<Ready>>()
  // When a destination's queue was last seen empty. Under steady traffic a
  // round starts every few dozen milliseconds and the queue is nearly always
  // empty (a send from memory leaves only its record), so a round reads it
  // at most once a second instead of once each. A failure here, or a round
  // that stores batches, forgets it at once; another process's failure or a
  // replay is seen within that second.
  const queueEmptyAt = new Map<string, number>()
  const queuedNow = (destinationId: string) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const at = queueEmptyAt.get(destinationId)
      if (at !== undefined && now - at < QUEUE_EMPTY_FRESH_MS) return Effect.succeed(0)
      return Effect.tap(queue.undelivered("telemetry", destinationId), (count) =>
        Effect.sync(() => {
          if (count === 0) queueEmptyAt.set(destinationId, now)
          else queueEmptyAt.delete(destinationId)
        }))
    })
  /** Set at shutdown: no new send from memory starts. */
  let closing = false
  // Records of batches the collector took, per destination, written
  // together at most every `RECORD_EVERY` (and at shutdown): one statement
  // where there was one a batch. On the embedded database every statement
  // takes the one session requests use. Their spans count as being sent
  // (pending) until then.
  const taken = new Map<string, Array<Taken>>()
  const recordsDue = Latch.makeUnsafe(false)
  /** Writes the destination's waiting records (before a failure's, so the records and `last_error` keep their order). */
  const writeRecordsOf = (destinationId: string) =>
    Effect.suspend(() => {
      const records = taken.get(destinationId)
      taken.delete(destinationId)
      if (records === undefined || records.length === 0) return Effect.void
      const touching = records.filter((record) => record.touch)
      const stored = queue.recordAttempted(records.map((record) => ({
        orgId: record.orgId,
        kind: "telemetry" as const,
        targetId: destinationId,
        status: record.status,
        payload: null,
        meta: record.meta,
        error: record.error
      })))
      return repo.whileExists(destinationId, stored, touching.length === 0 ? undefined : { error: touching.at(-1)!.error }).pipe(
        Effect.catchCause((cause) => Effect.logWarning("telemetry batches sent from memory could not be recorded", cause)),
        Effect.ensuring(Effect.sync(() => buffers.addSending(destinationId, -records.reduce((sum, record) => sum + record.spans, 0))))
      )
    })
  const writeRecords = Effect.suspend(() => Effect.forEach([...taken.keys()], writeRecordsOf, { discard: true }))
  const readyOf = (destinationId: string) => ready.get(destinationId)?.length ?? 0
  // A failure's record is stored while the destination's row is held
  // shared (`whileExists`; the undelivered count's trigger then locks its
  // target: destination first, as its deletion takes them), and the
  // destination's `last_error` is written after, by a statement of its
  // own: two processes recording failures of one destination would
  // deadlock raising their shared locks to update it in the transaction.
  // Successes, the common case, are recorded later with the destination's
  // others (`taken`), by a transaction that takes the row to update it first.
  const sendFromMemory = (
    orgId: string,
    destinationId: string,
    target: CollectorTarget,
    body: StoredBody,
    spanCount: number
  ) =>
    Effect.suspend(() => {
      let deferred = false
      return Effect.gen(function*() {
        const { result, durationMs } = yield* exportBody(target, body, spanCount)
        const meta = { span_count: spanCount, bytes: body.bytes, round_start: 0 }
        /** A failed batch's record, kept sealed for its retry or a replay (nothing when the destination is gone). */
        const record = (input: {
          readonly status: "retrying" | "failed"
          readonly payload: string
          readonly error: string
          readonly retryAfter?: Duration.Duration
          readonly meta?: typeof meta & Record<string, string | number>
        }) =>
          repo.whileExists(
            destinationId,
            queue.recordAttempted([{ orgId, kind: "telemetry", targetId: destinationId, ...input, meta: input.meta ?? meta }])
          )
        /** A batch the collector took: recorded with the destination's next ones (its spans count as sending until then). */
        const later = (record: Omit<Taken, "orgId" | "spans">) => {
          const entry = { ...record, orgId, spans: spanCount }
          const waiting = taken.get(destinationId)
          if (waiting === undefined) taken.set(destinationId, [entry])
          else waiting.push(entry)
          deferred = true
          recordsDue.openUnsafe()
        }
        switch (result._tag) {
          case "Accepted":
            later({
              status: "delivered",
              error: null,
              touch: touchOnSuccess(destinationId, null, yield* Clock.currentTimeMillis),
              meta: result.warning === undefined ? meta : { ...meta, warning: result.warning }
            })
            metrics.deliveryAttempt("telemetry", "Delivered", durationMs)
            metrics.spansExported("organizations", spanCount)
            return true
          case "Partial": {
            touchOnSuccess(destinationId, result.error, yield* Clock.currentTimeMillis)
            later({ status: "partial", error: result.error, touch: true, meta: { ...meta, rejected_spans: result.rejected } })
            const rejected = Math.min(spanCount, result.rejected)
            metrics.deliveryAttempt("telemetry", "Partial", durationMs)
            metrics.spansExported("organizations", spanCount - rejected)
            metrics.spansDropped("organizations", "rejected_by_collector", rejected)
            return true
          }
          case "Rejected":
            lastSuccess.delete(destinationId)
            yield* writeRecordsOf(destinationId)
            // Kept sealed for a replay; the round that a replay starts begins after this attempt.
            yield* record({ status: "failed", payload: seal(destinationId, body), error: result.error, meta: { ...meta, round_start: 1 } })
            yield* repo.recordError(destinationId, result.error)
            metrics.deliveryAttempt("telemetry", "Failed", durationMs)
            metrics.spansDropped("organizations", "export_failed", spanCount)
            return false
          case "Retryable":
            lastSuccess.delete(destinationId)
            yield* writeRecordsOf(destinationId)
            yield* record({
              status: "retrying",
              payload: seal(destinationId, body),
              error: result.error,
              retryAfter: Duration.millis(retryDelay(1, result))
            })
            yield* repo.recordError(destinationId, result.error)
            metrics.deliveryAttempt("telemetry", "Retry", durationMs)
            yield* queue.wake("telemetry")
            return false
        }
      }).pipe(
        Effect.catchCause((cause) =>
          Effect.as(Effect.logWarning("telemetry batch sent from memory could not be recorded", cause), false)
        ),
        Effect.ensuring(Effect.sync(() => {
          if (!deferred) buffers.addSending(destinationId, -spanCount)
          const left = (inFlight.get(destinationId) ?? 1) - 1
          if (left <= 0) inFlight.delete(destinationId)
          else inFlight.set(destinationId, left)
        })),
        // The slot is free: the next ready batch goes out at once after a
        // success; after a failure the next round decides (the queue then
        // holds the failed batch, so the ready ones join it there).
        Effect.flatMap((delivered) => {
          if (!delivered) queueEmptyAt.delete(destinationId)
          return readyOf(destinationId) === 0
            ? Effect.void
            : delivered && !closing && buffers.isActive(destinationId)
            ? startSends(destinationId, target)
            : Effect.sync(() => buffers.batchReady.openUnsafe())
        })
      )
    })

  /** Starts ready batches of the destination while it has free send slots. */
  const startSends = (destinationId: string, target: CollectorTarget): Effect.Effect<void, never, OutboundHttp> =>
    Effect.gen(function*() {
      const waiting = ready.get(destinationId)
      while (waiting !== undefined && waiting.length > 0 && (inFlight.get(destinationId) ?? 0) < MEMORY_SENDS) {
        const batch = waiting.shift()!
        inFlight.set(destinationId, (inFlight.get(destinationId) ?? 0) + 1)
        yield* FiberSet.run(memorySends, sendFromMemory(batch.orgId, destinationId, target, batch.body, batch.spanCount))
      }
      if (waiting !== undefined && waiting.length === 0) ready.delete(destinationId)
    })

  /**
   * Ready batches of the destination become queued deliveries, sealed, in
   * one statement, only while the destination exists (its deletion fails
   * what is queued then; a batch stored just after would outlive it).
   */
  const enqueueReady = (destinationId: string) =>
    Effect.gen(function*() {
      const waiting = ready.get(destinationId)
      ready.delete(destinationId)
      if (waiting === undefined || waiting.length === 0) return false
      queueEmptyAt.delete(destinationId)
      const spans = waiting.reduce((sum, batch) => sum + batch.spanCount, 0)
      // A destination deleted here meanwhile gets none: its buffered spans are dropped, and so are these.
      if (!buffers.isActive(destinationId)) {
        buffers.addSending(destinationId, -spans)
        return false
      }
      const stored = yield* repo.whileExists(
        destinationId,
        queue.enqueueAll(waiting.map((batch) => ({
          orgId: batch.orgId,
          kind: "telemetry" as const,
          targetId: destinationId,
          payload: seal(destinationId, batch.body),
          meta: { span_count: batch.spanCount, bytes: batch.body.bytes, round_start: 0 },
          capacity: queueBatches
        })))
      ).pipe(Effect.ensuring(Effect.sync(() => buffers.addSending(destinationId, -spans))))
      return Option.isSome(stored)
    })

  /**
   * `direct`: send from memory where there is room (otherwise, and at
   * shutdown, batches go to the queue). `round`: what started it, a full
   * batch or the period (see `SpanBuffers.cut`: a round started by a full
   * batch soon after the last cuts only full batches).
   */
  const flushOne = (destinationId: string, orgId: string, direct: boolean, round: Round) =>
    Effect.gen(function*() {
      // Only what is buffered now: spans captured while this round compresses
      // its batches wait for the next round (or the next full batch).
      // Draining until the buffer is empty would, under steady traffic, cut
      // a stream of tiny batches and then count the rest as dropped once
      // `room` ran out, with a healthy collector.
      let left = buffers.cut(destinationId, round, yield* Clock.currentTimeMillis)
      if (left > 0 || readyOf(destinationId) > 0) {
        const queued = yield* queuedNow(destinationId)
        let room = queueBatches - queued - (inFlight.get(destinationId) ?? 0) - readyOf(destinationId)
        // From memory only while nothing of the destination waits in the
        // queue: a collector that is failing is probed and backed off by the
        // queue's worker, not sent every new batch.
        const target = direct && !closing && queued === 0
          ? yield* targetOf(destinationId)
          : Option.none<CollectorTarget>()
        for (; left > 0; left--) {
          const batch = buffers.take(destinationId)
          if (batch === undefined) break
          if (room <= 0) {
            // The collector is not keeping up: drop rather than grow without bound.
            buffers.addDropped(destinationId, batch.spans)
            batch.release()
            continue
          }
          buffers.addSending(destinationId, batch.spans)
          const body = yield* compressBatch(batch).pipe(
            Effect.onInterrupt(() => Effect.sync(() => buffers.addSending(destinationId, -batch.spans)))
          )
          room -= 1
          const waiting = ready.get(destinationId)
          if (waiting === undefined) ready.set(destinationId, [{ orgId, body, spanCount: batch.spans }])
          else waiting.push({ orgId, body, spanCount: batch.spans })
          // The first batches leave while the next are compressed.
          if (Option.isSome(target)) yield* startSends(destinationId, target.value)
        }
        if (Option.isNone(target) && (yield* enqueueReady(destinationId))) yield* queue.wake("telemetry")
      }
      const dropped = buffers.takeDropped(destinationId)
      if (dropped > 0) yield* repo.addDropped(destinationId, dropped)
    })

  // Suspended: the set of buffers is read at each round, not once.
  const flushAll = (direct: boolean, round: Round) =>
    Effect.suspend(() =>
      Effect.forEach(buffers.states(), (state) => flushOne(state.destinationId, state.orgId, direct, round), {
        discard: true
      })
    )

  const settle = (outcome: Outcome, attempt: Settlement["attempt"]): Settlement => ({ outcome, attempt })

  // Per-batch database work kept small: the collector (URL and opened
  // headers) is cached (above), and a run of successes updates
  // `last_delivered_at` at most once a second. A deleted destination's
  // batches are failed at once and never claimed again; a batch stored just
  // after the delete (a flush round that had already taken its spans) is
  // not sent from the cache once this process knows of the delete (it
  // stopped buffering for it): it is looked up, and failed.
  const handle = (delivery: Claimed) =>
    Effect.gen(function*() {
      // A failure ends the round: a replay starts the next one from here.
      const fail = (error: string) => Outcome.failed(error, { round_start: delivery.attempts })
      const target = yield* targetOf(delivery.targetId)
      if (Option.isNone(target)) {
        return settle(fail("destination deleted"), { error: "destination deleted", durationMs: 0 })
      }
      if (delivery.payload === null) {
        return settle(fail("batch no longer kept"), { error: "batch no longer kept", durationMs: 0 })
      }
      const sealed = yield* box.open(delivery.payload, batchContext(delivery.targetId)).pipe(Effect.orDie)
      const bytes = Buffer.from(Redacted.value(sealed), "base64")
      const spanCount = Number(delivery.meta.span_count ?? 0)
      const size = Number(delivery.meta.bytes ?? 0)
      // The collector's messages come back with the header values masked.
      const { result, durationMs } = yield* exportBody(
        target.value,
        { gzipped: new Uint8Array(bytes), bytes: size },
        spanCount
      )
      // No response snippet is kept: a collector's body may echo what it was sent.
      const attempt = {
        statusCode: result.status,
        error: result._tag === "Accepted" ? undefined : result.error,
        durationMs
      }
      switch (result._tag) {
        case "Accepted":
          yield* recordSuccess(delivery.targetId, null)
          return settle(Outcome.delivered(result.warning === undefined ? {} : { warning: result.warning }), attempt)
        case "Partial":
          yield* recordSuccess(delivery.targetId, result.error)
          return settle(Outcome.partial(result.error, { rejected_spans: result.rejected }), attempt)
        case "Rejected":
          yield* recordError(delivery.targetId, result.error)
          return settle(fail(result.error), attempt)
        case "Retryable": {
          yield* recordError(delivery.targetId, result.error)
          const round = attemptInRound(delivery)
          if (round >= MAX_ATTEMPTS) {
            return settle(fail(`${result.error} (gave up after ${MAX_ATTEMPTS} attempts)`), attempt)
          }
          return settle(Outcome.retry(Duration.millis(retryDelay(round, result)), result.error), attempt)
        }
      }
    })

  // What became of the batch's spans, for the operators' metrics (a retry decides nothing yet).
  const countSpans = (delivery: Claimed, { outcome }: Settlement) =>
    Effect.sync(() => {
      const spans = Number(delivery.meta.span_count ?? 0)
      if (outcome._tag === "Delivered") metrics.spansExported("organizations", spans)
      else if (outcome._tag === "Failed") metrics.spansDropped("organizations", "export_failed", spans)
      else if (outcome._tag === "Partial") {
        const rejected = Math.min(spans, Number(outcome.meta?.rejected_spans ?? 0))
        metrics.spansExported("organizations", spans - rejected)
        metrics.spansDropped("organizations", "rejected_by_collector", rejected)
      }
    })

  const every = (period: Duration.Input, work: Effect.Effect<void>, what: string) =>
    work.pipe(
      Effect.catchCause((cause) => Effect.logWarning(`telemetry ${what} failed; trying again`, cause)),
      Effect.andThen(Effect.sleep(period)),
      Effect.forever,
      Effect.forkScoped
    )

  // The per-destination caches keep only destinations this process buffers for.
  const forget = Effect.sync(() => {
    for (const id of targets.keys()) if (!buffers.isActive(id)) targets.delete(id)
    queueEmptyAt.clear()
    // Spans of a destination that is gone, like its buffer's.
    for (const [id, waiting] of ready) {
      if (buffers.isActive(id)) continue
      ready.delete(id)
      for (const batch of waiting) buffers.addSending(id, -batch.spanCount)
    }
    lastSuccess.clear()
  })
  yield* refresh.pipe(Effect.catchCause((cause) => Effect.logWarning("telemetry refresh failed", cause)))
  yield* every(REFRESH_EVERY, Effect.andThen(refresh, forget), "refresh")
  yield* every(
    PRUNE_EVERY,
    Effect.asVoid(Effect.andThen(queue.prunePayloads("telemetry", KEEP_FAILED_HOURS), queue.pruneFinished("telemetry", KEEP_RECORDS_DAYS))),
    "prune"
  )
  // At shutdown, what is buffered becomes batches in the queue (any process
  // sends them later), and batches being sent from memory finish, within a
  // bounded time.
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      closing = true
    }).pipe(
      Effect.andThen(flushAll(false, "period")),
      Effect.andThen(FiberSet.awaitEmpty(memorySends)),
      Effect.andThen(writeRecords),
      Effect.timeout(SHUTDOWN_FLUSH),
      Effect.catchCause((cause) => Effect.logWarning("telemetry flush at shutdown did not finish", cause))
    )
  )
  // Closing the latch before flushing keeps a "batch ready" that arrives
  // during the flush for the next round. A round the latch started (a full
  // batch) cuts full batches; one the period started cuts everything. The
  // period is kept whatever rounds full batches start in between: the
  // spans left behind by the last full batch of a burst leave within
  // `FLUSH_EVERY` of the previous period round, not `FLUSH_EVERY` after
  // that batch.
  let startedBy: Round = "period"
  let periodAt = (yield* Clock.currentTimeMillis) + Duration.toMillis(FLUSH_EVERY)
  yield* Effect.sync(() => buffers.batchReady.closeUnsafe()).pipe(
    Effect.andThen(Effect.suspend(() => flushAll(true, startedBy))),
    Effect.catchCause((cause) => Effect.logWarning("telemetry flush failed; trying again", cause)),
    Effect.andThen(Effect.flatMap(Clock.currentTimeMillis, (now) =>
      buffers.batchReady.await.pipe(Effect.timeoutOption(Duration.millis(Math.max(0, periodAt - now))))
    )),
    Effect.flatMap((opened) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        if (Option.isSome(opened)) startedBy = "full"
        else {
          startedBy = "period"
          periodAt = now + Duration.toMillis(FLUSH_EVERY)
        }
      })
    ),
    Effect.forever,
    Effect.forkScoped
  )
  yield* recordsDue.await.pipe(
    Effect.andThen(Effect.sleep(RECORD_EVERY)),
    Effect.andThen(Effect.sync(() => recordsDue.closeUnsafe())),
    Effect.andThen(Effect.uninterruptible(writeRecords)),
    Effect.forever,
    Effect.forkScoped
  )
  yield* runWorker({
    kind: "telemetry",
    // A few batches in flight per destination (OTLP does not need order),
    // many destinations in parallel: a hanging collector holds at most
    // `perTarget` of the slots.
    concurrency: 32,
    perTarget: 4,
    leaseFor: Duration.seconds(60),
    pollEvery: Duration.seconds(5),
    handle: (delivery) => Effect.tap(handle(delivery), (settlement) => countSpans(delivery, settlement))
  })
}).pipe(
  // Export work belongs to no organization: keep its spans (SQL, HTTP) out
  // of the tracer altogether.
  Effect.withTracerEnabled(false)
))
