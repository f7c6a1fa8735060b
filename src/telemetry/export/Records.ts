/**
 * Records of batches sent from memory that the collector took, per
 * destination, written together at most every `RECORD_EVERY` (and at
 * shutdown): one statement where there was one a batch. On the embedded
 * database every statement takes the one session requests use. Their spans
 * count as being sent (pending) until then.
 */
import { Duration, Effect, Latch } from "effect"
import { DeliveryQueue } from "../../deliveries/DeliveryQueue.ts"
import { SpanBuffers } from "../Buffers.ts"
import { DestinationsRepo } from "../Repository.ts"

/** How long the records of batches the collector took wait to be written together. */
const RECORD_EVERY = Duration.seconds(1)

/** A batch sent from memory that the collector took, waiting for its record. */
export interface Taken {
  readonly orgId: string
  readonly status: "delivered" | "partial"
  readonly meta: Readonly<Record<string, string | number>>
  readonly error: string | null
  /** Whether it updates the destination's `last_delivered_at` and `last_error`. */
  readonly touch: boolean
  readonly spans: number
}

export interface Records {
  /** Keeps the record for the next write (within `RECORD_EVERY`). */
  readonly add: (destinationId: string, record: Taken) => void
  /** Writes the destination's waiting records (before a failure's, so the records and `last_error` keep their order). */
  readonly writeOf: (destinationId: string) => Effect.Effect<void>
  readonly writeAll: Effect.Effect<void>
  /** The loop: waits for a record, lets others join it for `RECORD_EVERY`, writes them. */
  readonly loop: Effect.Effect<never>
}

export const makeRecords = Effect.gen(function*() {
  const buffers = yield* SpanBuffers
  const repo = yield* DestinationsRepo
  const queue = yield* DeliveryQueue
  const taken = new Map<string, Array<Taken>>()
  const due = Latch.makeUnsafe(false)

  const writeOf = (destinationId: string) =>
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
      return repo.whileExists(
        destinationId,
        stored,
        touching.length === 0 ? undefined : { error: touching.at(-1)!.error }
      ).pipe(
        Effect.catchCause((cause) =>
          Effect.logWarning("telemetry batches sent from memory could not be recorded", cause)
        ),
        Effect.ensuring(
          Effect.sync(() => buffers.addSending(destinationId, -records.reduce((sum, record) => sum + record.spans, 0)))
        )
      )
    })
  const writeAll = Effect.suspend(() => Effect.forEach([...taken.keys()], writeOf, { discard: true }))

  const records: Records = {
    add: (destinationId, record) => {
      const waiting = taken.get(destinationId)
      if (waiting === undefined) taken.set(destinationId, [record])
      else waiting.push(record)
      due.openUnsafe()
    },
    writeOf,
    writeAll,
    loop: due.await.pipe(
      Effect.andThen(Effect.sleep(RECORD_EVERY)),
      Effect.andThen(Effect.sync(() => due.closeUnsafe())),
      Effect.andThen(Effect.uninterruptible(writeAll)),
      Effect.forever
    )
  }
  return records
})
