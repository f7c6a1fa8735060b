import type { OtlpSpan } from "../../src/otlp/Encoding.ts"
import type { SpanBuffers } from "../../src/telemetry/Buffers.ts"

/** Every span the destination's buffer holds, taken out (as a flush round that cuts everything would) and decoded. */
export const takeSpans = (buffers: SpanBuffers["Service"], destinationId: string): Array<OtlpSpan> => {
  const spans: Array<OtlpSpan> = []
  buffers.cut(destinationId, "period", Date.now())
  for (let batch = buffers.take(destinationId); batch !== undefined; batch = buffers.take(destinationId)) {
    const body = JSON.parse(Buffer.from(batch.body).toString("utf8")) as {
      resourceSpans: ReadonlyArray<{ scopeSpans: ReadonlyArray<{ spans: ReadonlyArray<OtlpSpan> }> }>
    }
    spans.push(...body.resourceSpans[0]!.scopeSpans[0]!.spans)
    batch.release()
  }
  return spans
}
