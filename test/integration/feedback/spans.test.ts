import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer, Option, Tracer } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { secretSamples } from "../../support/secretSamples.ts"

// Every span the service starts, recorded in memory.
const spans: Array<Tracer.NativeSpan> = []
const recording = Tracer.make({
  span(options) {
    const span = new Tracer.NativeSpan(options)
    spans.push(span)
    return span
  }
})

/** The span's own attributes and those of its parents, nearest first. */
const chain = (span: Tracer.AnySpan): Array<Tracer.AnySpan> => {
  const out: Array<Tracer.AnySpan> = [span]
  let current: Tracer.AnySpan = span
  while (current._tag === "Span" && Option.isSome(current.parent)) {
    current = current.parent.value
    out.push(current)
  }
  return out
}

const orgOf = (span: Tracer.AnySpan) =>
  chain(span).map((s) => s._tag === "Span" ? s.attributes.get("svc.org_id") : undefined).find((v) => v !== undefined)

layer(SvcTest.layer().pipe(Layer.provide(Layer.succeed(Tracer.Tracer, recording))), { excludeTestServices: true })(
  "feedback telemetry",
  (it) => {
    describe("review and promotion produce spans belonging to the organization", () => {
      it.effect("Feedback.submit, stage, reject, preview and promote spans carry svc.org_id on their chain; no secret in any attribute", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const task = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: { type: "object" } } })
          const run = yield* org.client.tasks.logRun({
            params: { task_id: task.id },
            payload: { input: 1, answer: {} }
          })
          const secret = secretSamples().find((s) => s.rule === "jwt")!.secret
          const a = yield* org.client.feedback.submit({
            payload: { inference_log_id: run.trace_id, score: -1, correction: { token: secret } }
          })
          const b = yield* org.client.feedback.submit({
            payload: { inference_log_id: run.trace_id, score: -1, correction: { x: "y" } }
          })
          yield* org.client.feedback.stage({ params: { feedback_id: a.id } })
          yield* org.client.feedback.reject({ params: { feedback_id: b.id } })
          const preview = yield* org.client.feedback.promotePreview({ params: { task_id: task.id }, query: {} })
          yield* org.client.feedback.promote({
            params: { task_id: task.id },
            payload: {
              base_dataset_id: preview.base_dataset_id,
              expected_feedback_revision: preview.expected_feedback_revision
            }
          })
          for (
            const name of [
              "Feedback.submit",
              "Feedback.stage",
              "Feedback.reject",
              "Feedback.preview",
              "Feedback.promote"
            ]
          ) {
            const mine = spans.filter((s) => s.name === name && orgOf(s) === org.orgId)
            assert.isAbove(mine.length, 0, `${name} span with svc.org_id`)
          }
          for (const span of spans) {
            for (const value of span.attributes.values()) assert.notInclude(String(value), secret)
          }
        }))
    })
  }
)
