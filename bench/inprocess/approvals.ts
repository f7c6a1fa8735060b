/**
 * Approvals: what a governed step costs when it opens an approval (an
 * approval row, an outbox event and a session event in one transaction)
 * against an immediate `allow` answer on the same server; and how late the
 * durable, database-claimed deadline scheduler fires against an in-memory
 * `setTimeout` for the same instants (the naive design it replaces).
 */
import { Effect } from "effect"
import { SvcTest } from "../../src/testing.ts"

const quantile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN
}
const ms = (value: number) => Math.round(value * 10) / 10

const STEPS = 200
const DEADLINES = 100

interface Result {
  readonly name: string
  readonly rows: Array<Record<string, string | number>>
  readonly notes: Array<string>
}

export default async (): Promise<Result> =>
  Effect.runPromise(
    Effect.gen(function*() {
      const svc = yield* SvcTest
      const org = yield* SvcTest.org()
      for (const [cls, mode] of [["fast", "allow"], ["review", "require_approval"]] as const) {
        yield* org.client.approvalPolicies.put({
          params: { action_class: cls },
          payload: { mode, review_seconds: 3600, expiring_notice_seconds: 0, timeout_action: "reject" }
        })
      }
      yield* org.client.approvalPolicies.put({
        params: { action_class: "deadline" },
        payload: { mode: "require_approval", review_seconds: 2, expiring_notice_seconds: 0, timeout_action: "reject" }
      })
      const session = yield* org.client.agentSessions.create({ payload: {} })

      const timeSteps = (cls: string) =>
        Effect.gen(function*() {
          const took: Array<number> = []
          for (let i = 0; i < STEPS; i++) {
            const started = performance.now()
            yield* org.client.agentSessions.governStep({
              params: { session_id: session.id },
              payload: { step_id: `${cls}-${i}`, tool: "t", action_class: cls, arguments: { i } }
            })
            took.push(performance.now() - started)
          }
          return took
        })
      const allow = yield* timeSteps("fast")
      const pending = yield* timeSteps("review")

      // Deadlines: DEADLINES approvals due within ~2 s; lag = expired event time - expires_at.
      const ids: Array<string> = []
      for (let i = 0; i < DEADLINES; i++) {
        const answer = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: { step_id: `deadline-${i}`, tool: "t", action_class: "deadline", arguments: {} }
        })
        ids.push(answer.approval_id!)
      }
      const rows = yield* Effect.gen(function*() {
        for (;;) {
          const found = yield* svc.sql<{ lag_ms: number }>`
          SELECT extract(epoch FROM (e.occurred_at - a.expires_at)) * 1000 AS lag_ms
          FROM approvals a JOIN events e ON e.type = 'approval.expired'
            AND (e.body::jsonb -> 'approval' ->> 'approval_id') = a.id::text
          WHERE a.id IN ${svc.sql.in(ids)}
        `
          if (found.length === ids.length) return found
          yield* Effect.sleep(200)
        }
      }).pipe(Effect.orDie)
      const lags = rows.map((r) => Number(r.lag_ms))

      // Baseline: setTimeout for comparable instants, in this process.
      const timerLags = yield* Effect.promise(() =>
        Promise.all(Array.from({ length: DEADLINES }, (_, i) =>
          new Promise<number>((resolve) => {
            const due = Date.now() + 2000 + i * 5
            setTimeout(() => resolve(Date.now() - due), due - Date.now())
          })))
      )

      return {
        name: "approvals",
        rows: [
          {
            variant: "svc step: allow (no approval)",
            n: STEPS,
            p50_ms: ms(quantile(allow, 0.5)),
            p95_ms: ms(quantile(allow, 0.95))
          },
          {
            variant: "svc step: pending (approval + outbox + session event)",
            n: STEPS,
            p50_ms: ms(quantile(pending, 0.5)),
            p95_ms: ms(quantile(pending, 0.95))
          },
          {
            variant: "svc deadline lag (DB-claimed scheduler)",
            n: DEADLINES,
            p50_ms: ms(quantile(lags, 0.5)),
            p95_ms: ms(quantile(lags, 0.95)),
            max_ms: ms(Math.max(...lags))
          },
          {
            variant: "baseline deadline lag (in-memory setTimeout)",
            n: DEADLINES,
            p50_ms: ms(quantile(timerLags, 0.5)),
            p95_ms: ms(quantile(timerLags, 0.95)),
            max_ms: ms(Math.max(...timerLags))
          }
        ],
        notes: [
          `database: ${svc.database}; pending/allow step p50 ratio ${
            ms(quantile(pending, 0.5) / quantile(allow, 0.5))
          }`,
          "setTimeout is not durable: it loses deadlines on restart and fires them once per process; the scheduler does neither."
        ]
      }
    }).pipe(Effect.provide(SvcTest.layer()), Effect.scoped)
  )
