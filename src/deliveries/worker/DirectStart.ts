/**
 * Sends without a fiber of their own. A worker's `handleDirect` (when its
 * kind has one) is offered each delivery first: it either declines, and the
 * delivery is sent by `handle` in a fiber as before, or it takes it and
 * calls `done` exactly once, later, with the settlement. The webhook
 * sender takes the common case (an endpoint and an event body this process
 * already knows, an answer in 2xx from a healthy endpoint) and leaves
 * every other turn of a send (a failure to count, an endpoint to
 * deactivate, a recovery to announce) to an effect of its own, forked then.
 *
 * Speeds up: no fiber, context, generators or `Effect.callback` per
 * send; the Effect runtime's share of svc's samples in the sends went from
 * 10 % to 1 % (`bench/notes/delivery-log.md`, "What was cut").
 *
 * The span per send stays: `startSpan` opens it on the tracer the worker
 * found in its context (the same tracer, parent, annotations and sampling
 * `Effect.withSpan` would use there), and the sender ends it with the
 * send's settlement, so operators and organizations' collectors see the
 * same `WebhookSender.deliver` span with the same attributes.
 */
import { Clock, Context, Effect, Exit, LogLevel, Option, References, Tracer } from "effect"
import type { Claimed, Settlement } from "../Types.ts"

/**
 * Takes `delivery` (answers true, and calls `done` once, never before
 * returning) or declines it (answers false and never calls `done`).
 * `done(undefined)`: the send was interrupted (its handler's scope closed
 * at shutdown): nothing to record, but its slot is free.
 */
export type DirectHandle = (delivery: Claimed, done: (settlement: Settlement | undefined) => void) => boolean

export interface SpanStarter {
  /** A started span named `name` with `attributes`, as `Effect.withSpan` would open it where the starter was made. */
  readonly start: (name: string, attributes: Readonly<Record<string, unknown>>) => Tracer.Span
  /** Ends `span` now with the value `value`. */
  readonly end: (span: Tracer.Span, value: unknown) => void
}

/**
 * The span starter of the current context, or none when tracing is off
 * there (then sends keep their fibers, which make no-op spans).
 */
export const spanStarter: Effect.Effect<Option.Option<SpanStarter>> = Effect.gen(function*() {
  if (!(yield* References.TracerEnabled)) return Option.none()
  const tracer = yield* Tracer.Tracer
  const clock = yield* Clock.Clock
  const timing = yield* References.TracerTimingEnabled
  const annotations = yield* References.TracerSpanAnnotations
  const links = yield* References.TracerSpanLinks
  const sampledHere = !LogLevel.isGreaterThan(yield* Tracer.MinimumTraceLevel, yield* Tracer.CurrentTraceLevel)
  const parent = yield* Effect.option(Effect.currentParentSpan)
  const sampled = Option.isSome(parent) && parent.value.sampled === false ? false : sampledHere
  const now = () => (timing ? clock.currentTimeNanosUnsafe() : 0n)
  return Option.some<SpanStarter>({
    start: (name, attributes) => {
      const span = tracer.span({
        name,
        parent,
        annotations: Context.empty(),
        links: links.length === 0 ? [] : links.slice(),
        startTime: now(),
        kind: "internal",
        root: false,
        sampled
      })
      for (const key in annotations) span.attribute(key, annotations[key])
      for (const key in attributes) span.attribute(key, attributes[key])
      return span
    },
    end: (span, value) => span.end(now(), Exit.succeed(value))
  })
})
