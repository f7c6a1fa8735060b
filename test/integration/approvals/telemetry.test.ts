/**
 * Telemetry contract: background work of an organization is traced under a
 * span carrying `svc.org_id`, so it can be exported to that organization's
 * collector. The scheduler's per-approval spans carry it.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer, Tracer } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { eventually } from "../../support/http.ts"

const spans: Array<Tracer.Span> = []
const recorder = Tracer.make({
  span(options) {
    const span = Tracer.nativeTracer.span(options)
    spans.push(span)
    return span
  }
})

layer(SvcTest.layer().pipe(Layer.provide(Layer.succeed(Tracer.Tracer, recorder))), { excludeTestServices: true })(
  "approval spans",
  (it) => {
    describe("scheduler spans", () => {
      it.effect("each fired deadline is a span Approvals.fireDeadline annotated with svc.org_id, without payloads", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          yield* org.client.approvalPolicies.put({
            params: { action_class: "quick" },
            payload: {
              mode: "require_approval",
              review_seconds: 1,
              expiring_notice_seconds: 0,
              timeout_action: "reject"
            }
          })
          const session = yield* org.client.agentSessions.create({ payload: {} })
          const answer = yield* org.client.agentSessions.governStep({
            params: { session_id: session.id },
            payload: { step_id: "s", tool: "t", action_class: "quick", arguments: { secret_arg: "do-not-export" } }
          })
          const fired = yield* eventually(
            Effect.sync(() =>
              spans.find((s) =>
                s.name === "Approvals.fireDeadline" && s.attributes.get("svc.approval_id") === answer.approval_id
              )
            ),
            { what: "the expiry span" }
          )
          assert.strictEqual(fired.attributes.get("svc.org_id"), org.orgId)
          assert.strictEqual(fired.attributes.get("svc.deadline"), "expire")
          for (const span of spans) {
            for (const value of span.attributes.values()) assert.notInclude(String(value), "do-not-export")
          }
          const decided = spans.find((s) => s.name === "AgentSessions.governStep")
          assert.isDefined(decided)
        }))
    })
  }
)
