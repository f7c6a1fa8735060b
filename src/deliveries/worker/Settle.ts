/**
 * Outcomes are written in batches, one statement each: whatever finished
 * while the last batch was being written, plus a short linger while sends
 * are still finishing (not when a delivery waits only for recording).
 *
 * An outcome this process knows is never dropped because the database did
 * not answer: the batch stays here and is tried again on `settleBackoff`
 * (50 ms doubling to 1 s) until the database answers, typically well
 * within the lease, so a delivery is sent twice only if this process stops
 * before that. Meanwhile `failing()` holds: the worker starts and claims
 * nothing (what it sent now could not be recorded either). Only a batch the
 * database refuses while it answers other statements (a statement that
 * cannot succeed) is given up, after a few tries: its deliveries are sent
 * again once their leases run out.
 */
import { Cause, Duration, Effect, Exit, Latch, Schedule } from "effect"
import type { DeliveryQueue } from "../DeliveryQueue.ts"
import type { DeliveryKind, Settled, SettleItem } from "../Types.ts"

/** Most settlements written in one statement. */
export const SETTLE_BATCH = 256

/** How long a settle batch may wait for more outcomes while sends are finishing. */
const SETTLE_LINGER = Duration.millis(5)

/** Failed tries of one settle batch, while the database answers otherwise, before it is given up. */
const SETTLE_REFUSALS = 3

/** Retrying a batch the database did not write: 50 ms, doubling, at most 1 s apart. */
const settleBackoff = Schedule.min([Schedule.exponential("50 millis"), Schedule.spaced("1 second")])

/** Why one try of a batch ended without it being written. */
export interface NotWritten {
  readonly _tag: "Unanswered" | "Refused"
  readonly cause: Cause.Cause<unknown>
}

/**
 * When a batch is tried again, one schedule per batch: on `settleBackoff`
 * for as long as the database does not answer, and until the
 * `SETTLE_REFUSALS`th refusal while it answers (a statement that cannot
 * succeed), when the batch is given up.
 */
export const settleRetry = () => {
  let refusals = 0
  return settleBackoff.pipe(
    Schedule.setInputType<NotWritten>(),
    Schedule.while(({ input }) => input._tag === "Unanswered" || ++refusals < SETTLE_REFUSALS)
  )
}

export interface Pending {
  readonly item: SettleItem
  readonly target: string
}

export interface SettleHooks {
  readonly kind: DeliveryKind
  /** The batch is written (`Settled`) or given up (the cause): account for it. */
  readonly settled: (batch: ReadonlyArray<Pending>, result: Settled | Cause.Cause<unknown>) => Effect.Effect<void>
  /** Whether a batch may wait for more outcomes (sends are finishing, and none waits only for recording). */
  readonly mayLinger: () => boolean
  /**
   * A try ended, written or not: the claim loop may look again; `logWaiting`
   * and `rowsChanged` as `Settled` says them (true when the try was not written).
   */
  readonly changed: (logWaiting: boolean, rowsChanged: boolean) => void
}

export type Settler = Effect.Success<ReturnType<typeof makeSettler>>

/** Starts the settle loop in a fiber of the current scope. */
export const makeSettler = Effect.fnUntraced(function*(
  queue: Pick<DeliveryQueue["Service"], "settleMany" | "reachable">,
  hooks: SettleHooks
) {
  const waiting: Array<Pending> = []
  const wanted = Latch.makeUnsafe(false)
  const urgent = Latch.makeUnsafe(false)
  let lingering = false
  let failing = false

  /** One try: written, or why not (the database unreachable, or refusing this batch while it answers). */
  const attempt = (batch: ReadonlyArray<Pending>) =>
    // Asked afresh at every try.
    Effect.suspend(() => queue.settleMany(batch.map((pending) => pending.item))).pipe(
      Effect.catchCause((cause) =>
        Effect.flatMap(queue.reachable.pipe(Effect.orElseSucceed(() => false)), (reachable) => {
          const logged = failing ? Effect.void : Effect.logError(
            "recording delivery outcomes failed; they are kept here and recorded as soon as the database answers",
            Cause.squash(cause)
          ).pipe(Effect.annotateLogs({ kind: hooks.kind, waiting: waiting.length }))
          failing = true
          return Effect.andThen(logged, Effect.fail<NotWritten>({ _tag: reachable ? "Refused" : "Unanswered", cause }))
        })
      ),
      Effect.onExit((exit) =>
        Effect.sync(() =>
          Exit.isSuccess(exit)
            ? hooks.changed(exit.value.logWaiting !== false, exit.value.rowsChanged !== false)
            : hooks.changed(true, true)
        )
      )
    )

  /** Writes one batch, trying again while the database does not answer. */
  const write = (batch: ReadonlyArray<Pending>) =>
    attempt(batch).pipe(
      Effect.retry(settleRetry()),
      Effect.matchEffect({
        onSuccess: (settled) =>
          Effect.gen(function*() {
            if (failing) {
              yield* Effect.logInfo("delivery outcomes are recorded again").pipe(
                Effect.annotateLogs({ kind: hooks.kind, recorded: batch.length })
              )
            }
            failing = false
            waiting.splice(0, batch.length)
            yield* hooks.settled(batch, settled)
          }),
        // Refused while the database answers: given up. Its deliveries stay
        // `sending` until their leases run out, then they are sent again.
        onFailure: (why) =>
          Effect.gen(function*() {
            failing = false
            waiting.splice(0, batch.length)
            yield* Effect.logError(
              "the database refused to record delivery outcomes; they are sent again once their leases run out",
              Cause.squash(why.cause)
            ).pipe(Effect.annotateLogs({ kind: hooks.kind, given_up: batch.length }))
            yield* hooks.settled(batch, why.cause)
          })
      })
    )

  yield* Effect.gen(function*() {
    yield* wanted.await
    wanted.closeUnsafe()
    // While sends are still finishing, let a few more join the batch: one
    // statement for many outcomes leaves the database to the others. Not
    // when a delivery waits only for outcomes to be recorded: lingering
    // would hold its target's sends back.
    if (waiting.length < SETTLE_BATCH / 4 && !failing && hooks.mayLinger()) {
      lingering = true
      urgent.closeUnsafe()
      yield* urgent.await.pipe(Effect.timeoutOption(SETTLE_LINGER))
      lingering = false
    }
    // Each batch leaves `waiting` once written or given up.
    while (waiting.length > 0) yield* write(waiting.slice(0, SETTLE_BATCH))
  }).pipe(Effect.forever, Effect.forkScoped)

  return {
    /** Queues an ended send's outcome for the next batch. */
    push: (pending: Pending) => {
      waiting.push(pending)
      wanted.openUnsafe()
    },
    /** Outcomes not yet written. */
    pending: () => waiting.length,
    /** The last try failed and the database has not answered since. */
    failing: () => failing,
    /** Whether a batch is waiting for more outcomes now. */
    lingering: () => lingering,
    /** Something now waits for recording: end the linger early. */
    hurry: () => {
      if (lingering) urgent.openUnsafe()
    }
  }
})
