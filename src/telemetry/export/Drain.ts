/**
 * The durable drain: the shared delivery worker claims queued batches (any
 * process may) and exports them, retrying 429/502/503/504 and network
 * failures with `SVC_TELEMETRY_RETRY_SCHEDULE`'s delays and `Retry-After`,
 * one attempt more per round than the schedule has delays (`Retries.ts`).
 *
 * Per-batch database work kept small: the collector (URL and opened
 * headers) is cached (`Targets`), and a run of successes updates
 * `last_delivered_at` at most once a second (`LastOutcome`). A deleted
 * destination's batches are failed at once and never claimed again; a batch
 * stored just after the delete (a flush round that had already taken its
 * spans) is not sent from the cache once this process knows of the delete
 * (it stopped buffering for it): it is looked up, and failed.
 */
import { Duration, Effect, Option, Redacted } from "effect"
import { type Claimed, Outcome, type Settlement } from "../../deliveries/DeliveryQueue.ts"
import { runWorker } from "../../deliveries/worker/DeliveryWorker.ts"
import { Metrics } from "../../observability/Metrics.ts"
import { SvcConfig } from "../../platform/Config.ts"
import { SecretBox } from "../../platform/Crypto.ts"
import { exportBody } from "../Collector.ts"
import { batchContext } from "../Destinations.ts"
import type { LastOutcome } from "./LastOutcome.ts"
import { attemptInRound, retryDelay } from "./Retries.ts"
import type { Targets } from "./Targets.ts"

const settle = (outcome: Outcome, attempt: Settlement["attempt"]): Settlement => ({ outcome, attempt })

export const runDrain = (deps: { readonly targets: Targets; readonly lastOutcome: LastOutcome }) =>
  Effect.gen(function*() {
    const { lastOutcome, targets } = deps
    const box = yield* SecretBox
    const metrics = yield* Metrics
    const { telemetryExportTimeout, telemetryRetrySchedule: schedule } = yield* SvcConfig

    const handle = (delivery: Claimed) =>
      Effect.gen(function*() {
        // A failure ends the round: a replay starts the next one from here.
        const fail = (error: string) => Outcome.failed(error, { round_start: delivery.attempts })
        const target = yield* targets.of(delivery.targetId)
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
          spanCount,
          telemetryExportTimeout
        )
        // No response snippet is kept: a collector's body may echo what it was sent.
        const attempt = {
          statusCode: result.status,
          error: result._tag === "Accepted" ? undefined : result.error,
          durationMs
        }
        switch (result._tag) {
          case "Accepted":
            yield* lastOutcome.recordSuccess(delivery.targetId, null)
            return settle(Outcome.delivered(result.warning === undefined ? {} : { warning: result.warning }), attempt)
          case "Partial":
            yield* lastOutcome.recordSuccess(delivery.targetId, result.error)
            return settle(Outcome.partial(result.error, { rejected_spans: result.rejected }), attempt)
          case "Rejected":
            yield* lastOutcome.recordError(delivery.targetId, result.error)
            return settle(fail(result.error), attempt)
          case "Retryable": {
            yield* lastOutcome.recordError(delivery.targetId, result.error)
            const round = attemptInRound(delivery)
            if (round > schedule.length) {
              return settle(fail(`${result.error} (gave up after ${schedule.length + 1} attempts)`), attempt)
            }
            return settle(Outcome.retry(retryDelay(schedule, round, result), result.error), attempt)
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
  })
