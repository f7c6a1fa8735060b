/**
 * What the capturing tracer (`src/telemetry/Capture.ts`) needs of the
 * operator's trace pipeline (`OperatorTraces.ts`), kept apart so the tracer
 * depends on this contract only.
 */
import { Context, type Tracer } from "effect"

/** Synchronous: it runs inside `Span.end`, on the request's fiber. */
export interface OperatorSink {
  /** The sampler's decision for a new trace. */
  readonly sampleRoot: (traceId: string) => boolean
  /** The sampler's decision under a remote parent (a caller's `traceparent`). */
  readonly sampleRemote: (parentSampled: boolean, traceId: string) => boolean
  /** Queues an ended span, or drops and counts it when the queue is full. */
  readonly offer: (span: Tracer.Span) => void
}

/** The operator pipeline, when the `OTEL_*` variables turn it on; `undefined` (off) by default. */
export class OperatorSpans extends Context.Reference<OperatorSink | undefined>("svc/observability/OperatorSpans", {
  defaultValue: () => undefined
}) {}
