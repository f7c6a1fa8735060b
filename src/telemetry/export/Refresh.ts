/**
 * The destinations refresh: which organizations have a destination, the
 * database's view (in-process creates and deletes apply at once, other
 * processes' within `REFRESH_EVERY`). After each, what this process keeps
 * per destination is kept only for those it buffers for.
 */
import { Duration, Effect } from "effect"
import { SpanBuffers } from "../Buffers.ts"
import { DestinationsRepo } from "../Repository.ts"

const REFRESH_EVERY = Duration.seconds(5)

export interface Refresh {
  readonly once: Effect.Effect<void>
  /** Every `REFRESH_EVERY`, then `forgetGone`; a failed round is logged and tried again. */
  readonly loop: Effect.Effect<never>
}

export const makeRefresh = (forgetGone: () => void) =>
  Effect.gen(function*() {
    const buffers = yield* SpanBuffers
    const repo = yield* DestinationsRepo
    const once = Effect.gen(function*() {
      const rows = yield* repo.active()
      buffers.sync(rows.map((row) => ({ orgId: row.org_id, destinationId: row.id })))
    })
    const refresh: Refresh = {
      once,
      loop: Effect.andThen(once, Effect.sync(forgetGone)).pipe(
        Effect.catchCause((cause) => Effect.logWarning("telemetry refresh failed; trying again", cause)),
        Effect.andThen(Effect.sleep(REFRESH_EVERY)),
        Effect.forever
      )
    }
    return refresh
  })
