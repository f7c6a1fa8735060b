/**
 * Sends without a fiber of their own. A worker's `handleDirect` (when its
 * kind has one) is offered each delivery first: it either declines, and the
 * delivery is sent by `handle` in a fiber as before, or it takes it and
 * calls `done` exactly once, later, with the settlement. The webhook
 * sender takes every HTTPS send to an endpoint and event body this process
 * already knows; a broker, or an endpoint or event to read first, is sent
 * by `handle`.
 *
 * Speeds up: no fiber, context, generators or `Effect.callback` per
 * send; the Effect runtime's share of svc's samples in the sends went from
 * 10 % to 1 % (`bench/notes/delivery-log.md`, "What was cut").
 *
 * The span per send stays: `spanStarter` opens it on the tracer the worker
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
 * The span starter of the current context. When tracing is off there, every
 * span it starts is the one that records nothing (as `Effect.withSpan`'s
 * would be), so a send takes the same path traced or not.
 */
export const spanStarter: Effect.Effect<SpanStarter> = Effect.gen(function*() {
  if (!(yield* References.TracerEnabled)) {
    const none = yield* Effect.makeSpan("DirectStart.untraced")
    return { start: () => none, end: () => {} }
  }
  const tracer = yield* Tracer.Tracer
  const clock = yield* Clock.Clock
  const timing = yield* References.TracerTimingEnabled
  const annotations = yield* References.TracerSpanAnnotations
  const links = yield* References.TracerSpanLinks
  const sampledHere = !LogLevel.isGreaterThan(yield* Tracer.MinimumTraceLevel, yield* Tracer.CurrentTraceLevel)
  const parent = yield* Effect.option(Effect.currentParentSpan)
  const sampled = Option.isSome(parent) && parent.value.sampled === false ? false : sampledHere
  const now = () => (timing ? clock.currentTimeNanosUnsafe() : 0n)
  return {
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
  } satisfies SpanStarter
})
