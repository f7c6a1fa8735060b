/**
 * Collectors by destination id. A destination's URL and headers never
 * change (there is no update: a new collector is a new destination, a new
 * id), so an entry stays right for as long as the destination exists. It
 * is used only while this process buffers for the destination, which
 * stops at once on a delete here and at the next refresh (the database's
 * view, `REFRESH_EVERY`) on a delete in another process; the refresh then
 * drops entries of destinations that are gone. A batch of a destination
 * this process does not buffer for is looked up each time.
 */
import { Effect, Option } from "effect"
import { SpanBuffers } from "../Buffers.ts"
import type { CollectorTarget } from "../Collector.ts"
import { TelemetryDestinations } from "../Destinations.ts"

export interface Targets {
  /** The destination's collector; none once it is deleted. */
  readonly of: (destinationId: string) => Effect.Effect<Option.Option<CollectorTarget>>
  /** Drops the entries of destinations this process no longer buffers for. */
  readonly forgetGone: () => void
}

export const makeTargets = Effect.gen(function*() {
  const buffers = yield* SpanBuffers
  const destinations = yield* TelemetryDestinations
  const targets = new Map<string, Option.Option<CollectorTarget>>()
  const targetsOf: Targets = {
    of: (id) =>
      Effect.gen(function*() {
        const cached = targets.get(id)
        if (cached !== undefined && buffers.isActive(id)) return cached
        const target: Option.Option<CollectorTarget> = yield* destinations.target(id)
        if (buffers.isActive(id)) targets.set(id, target)
        return target
      }),
    forgetGone: () => {
      for (const id of targets.keys()) if (!buffers.isActive(id)) targets.delete(id)
    }
  }
  return targetsOf
})
