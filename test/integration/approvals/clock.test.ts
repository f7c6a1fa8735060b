/**
 * Deadlines are the database's, not the process's. The
 * service runs with a process clock an hour ahead of, or behind, the
 * database's (an Effect `Clock` that is off; the system clock is not
 * touched): deadlines are set, fire and close decisions at the same moment
 * as with a true clock.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Clock, Duration, Effect, Layer } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { eventually } from "../../support/http.ts"

const HOUR = 3_600_000

/** The real clock, off by `offsetMs` for every reading of the time (sleeps stay true). */
const skewedClock = (offsetMs: number) =>
  Layer.effect(
    Clock.Clock,
    Clock.clockWith((real) =>
      Effect.succeed<Clock.Clock>({
        currentTimeMillisUnsafe: () => real.currentTimeMillisUnsafe() + offsetMs,
        currentTimeMillis: Effect.sync(() => real.currentTimeMillisUnsafe() + offsetMs),
        currentTimeNanosUnsafe: () => real.currentTimeNanosUnsafe() + BigInt(offsetMs) * 1_000_000n,
        currentTimeNanos: Effect.sync(() => real.currentTimeNanosUnsafe() + BigInt(offsetMs) * 1_000_000n),
        monotonicTimeNanosUnsafe: () => real.monotonicTimeNanosUnsafe(),
        monotonicTimeNanos: real.monotonicTimeNanos,
        sleep: (duration: Duration.Duration) => real.sleep(duration)
      })
    )
  )

const REVIEW_SECONDS = 3

const step = (step_id: string) => ({
  step_id,
  tool: "stripe.refund",
  action_class: "payments.refund",
  arguments: { amount: 1 }
})

for (const [name, offset] of [["an hour ahead of", HOUR], ["an hour behind", -HOUR]] as const) {
  layer(SvcTest.layer().pipe(Layer.provide(skewedClock(offset))), { excludeTestServices: true })(
    `a process clock ${name} the database's`,
    (it) => {
      describe("deadlines follow the database's clock", () => {
        it.effect(
          "an approval's deadline is the database's now plus its review time; it fires then, and a decision before it counts",
          () =>
            Effect.gen(function*() {
              const svc = yield* SvcTest
              const org = yield* SvcTest.org()
              yield* org.client.approvalPolicies.put({
                params: { action_class: "payments.refund" },
                payload: {
                  mode: "require_approval",
                  review_seconds: REVIEW_SECONDS,
                  expiring_notice_seconds: 0,
                  timeout_action: "reject"
                }
              })
              // The service really runs on the skewed clock: its request log line says so.
              const stamped = new Date(JSON.parse(svc.logLines().at(-1)!).time).getTime()
              assert.approximately(stamped - Date.now(), offset, 60_000)

              const session = yield* org.client.agentSessions.create({ payload: {} })
              const waiting = yield* org.client.agentSessions.governStep({
                params: { session_id: session.id },
                payload: step("waits")
              })
              const decided = yield* org.client.agentSessions.governStep({
                params: { session_id: session.id },
                payload: step("decided")
              })
              // The database and this test share the machine's clock.
              const requestedAt = Date.now()

              const snapshot = yield* org.client.approvals.get({ params: { approval_id: waiting.approval_id! } })
              assert.strictEqual(snapshot.status, "pending")
              const left = new Date(snapshot.expires_at).getTime() - requestedAt
              assert.isAtMost(left, REVIEW_SECONDS * 1000 + 1000)
              assert.isAbove(left, 0)

              // Within the review time a decision is taken, not refused as late.
              const approved = yield* org.client.approvals.decide({
                params: { approval_id: decided.approval_id! },
                payload: { decision: "approve" }
              })
              assert.strictEqual(approved.status, "approved")

              // The scheduler fires the deadline when the database's clock reaches it.
              const expired = yield* eventually(
                Effect.map(
                  org.client.approvals.get({ params: { approval_id: waiting.approval_id! } }),
                  (current) => current.status === "expired" ? current : undefined
                ),
                { timeoutMs: 30_000, intervalMs: 200, what: "the approval to expire" }
              )
              assert.strictEqual(expired.status, "expired")
              assert.isAtLeast(Date.now(), new Date(snapshot.expires_at).getTime())
            }),
          60_000
        )
      })
    }
  )
}
