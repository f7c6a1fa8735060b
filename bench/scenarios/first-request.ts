/**
 * The first request after a start: a task, a run and a correction are
 * made, svc is restarted on the same database, and as soon as it answers
 * `/ready` one `POST /v1/feedback` with a correction is timed, then
 * `WARM` more one after another, after each of five starts. The aim: the
 * first within 2x the median of the warm ones (a start warms what the
 * first correction needs: the validation workers, the task's compiled
 * schema, the first write, the HTTP side: `src/feedback/WarmStart.ts`,
 * `src/server/WarmRequest.ts`). On a two-core machine, same run, medians
 * of first/warm: PGlite 1.94, PostgreSQL 2.01 (before the authenticated
 * rehearsal request, 2.9 and 2.21); bench/notes/first-request.md has the
 * figures and what remains. Beside them, `IDLE` requests each after a
 * pause past the key cache's lifetime: what a running service answers a
 * key that has not been used for a moment, the yardstick of a start that
 * left nothing cold.
 */
import * as path from "node:path"
import { freshDatabase } from "../support/db.ts"
import { atMost, type BenchContext, type ScenarioResult } from "../support/scenario.ts"
import { median, round } from "../support/stats.ts"
import { startSvc } from "../support/svc.ts"
import { answerSchema, correction } from "./writes.ts"

const WARM = 20
/** Requests after an idle pause, and the pause: past the key cache's 2 s. */
const IDLE = 3
const IDLE_MS = 2_500

export default async (context: BenchContext): Promise<ScenarioResult> => {
  const rounds = context.quick ? 1 : 5
  const rows: Array<Record<string, string | number>> = []
  const aims = []
  for (const checkout of context.checkouts) {
    const database = await freshDatabase(context.database, `first_${checkout.label}`)
    const log = path.join(context.logDir, `first-request-${checkout.label}-${context.database}.log`)
    try {
      const setup = await startSvc(checkout, database, {}, log)
      let key: string
      let traceId: string
      try {
        key = (await setup.provision()).key
        const task = await setup.api<{ id: string }>(key, "POST", "/v1/tasks", { name: "orders", answer_schema: answerSchema })
        traceId = (await setup.api<{ trace_id: string }>(key, "POST", `/v1/tasks/${task.id}/runs`, {
          input: { ticket: "where is my refund" },
          answer: correction(0)
        })).trace_id
      } finally {
        await setup.stop()
      }
      for (let round_ = 0; round_ < rounds; round_++) {
        const svc = await startSvc(checkout, database, {}, log)
        try {
          const feedback = async (i: number) => {
            const started = performance.now()
            await svc.api(key, "POST", "/v1/feedback", { inference_log_id: traceId, score: -1, correction: correction(i) })
            return performance.now() - started
          }
          const first = await feedback(1)
          const warm: Array<number> = []
          for (let i = 0; i < WARM; i++) warm.push(await feedback(i + 2))
          const warmMedian = median(warm)
          // A running service's request after its key has been idle past
          // the key cache's lifetime (`KEY_CACHE_TTL`, 2 s): it looks the
          // key up again, as any first request of a key does.
          const idle: Array<number> = []
          for (let i = 0; i < IDLE; i++) {
            await new Promise((resolve) => setTimeout(resolve, IDLE_MS))
            idle.push(await feedback(WARM + i + 2))
          }
          const idleMedian = median(idle)
          rows.push({
            svc: checkout.label,
            start: round_ + 1,
            "first ms": round(first, 1),
            "warm median ms": round(warmMedian, 1),
            "first / warm": round(first / warmMedian, 2),
            "idle key ms": round(idleMedian, 1),
            "first / idle key": round(first / idleMedian, 2)
          })
          aims.push(atMost(`${checkout.label}: first correction after start ${round_ + 1} / warm median`, first / warmMedian, 2))
        } finally {
          await svc.stop()
        }
      }
    } finally {
      await database.drop()
    }
  }
  return {
    scenario: "first-request",
    database: context.database,
    rows,
    aims,
    notes: [
      `After each start (once /ready answers 200): one POST /v1/feedback with a correction, timed from the client, then ${WARM} more one after another (warm), then ${IDLE} each after ${IDLE_MS} ms of idle (idle key: the key cache's entry has lapsed, as for any key not used for 2 s).`
    ]
  }
}
