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
import { armTitle, startBaseline } from "../support/baselines.ts"
import { freshDatabase } from "../support/db.ts"
import { atMost, type BenchContext, type ScenarioResult } from "../support/scenario.ts"
import { median, round } from "../support/stats.ts"
import { apiOn, startSvc } from "../support/svc.ts"
import { answerSchema, correction } from "./writes.ts"

const WARM = 20
/** Requests after an idle pause, and the pause: past the key cache's 2 s. */
const IDLE = 3
const IDLE_MS = 2_500

/**
 * One POST /v1/feedback with a correction to a server that has just
 * started, `WARM` more one after another, then `IDLE` each after a pause
 * past the key cache's lifetime (`KEY_CACHE_TTL`, 2 s): what a running
 * service answers a key it has not seen for a moment. Client side, ms.
 */
const timeAfterStart = async (baseUrl: string, key: string, traceId: string) => {
  const api = apiOn(baseUrl)
  const feedback = async (i: number) => {
    const started = performance.now()
    await api(key, "POST", "/v1/feedback", { inference_log_id: traceId, score: -1, correction: correction(i) })
    return performance.now() - started
  }
  const first = await feedback(1)
  const warm: Array<number> = []
  for (let i = 0; i < WARM; i++) warm.push(await feedback(i + 2))
  const idle: Array<number> = []
  for (let i = 0; i < IDLE; i++) {
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS))
    idle.push(await feedback(WARM + i + 2))
  }
  const warmMedian = median(warm)
  const idleMedian = median(idle)
  return {
    "first ms": round(first, 1),
    "warm median ms": round(warmMedian, 1),
    "first / warm": round(first / warmMedian, 2),
    "idle key ms": round(idleMedian, 1),
    "first / idle key": round(first / idleMedian, 2)
  }
}

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
        const task = await setup.api<{ id: string }>(key, "POST", "/v1/tasks", {
          name: "orders",
          answer_schema: answerSchema
        })
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
          const row = await timeAfterStart(svc.baseUrl, key, traceId)
          rows.push({ svc: checkout.label, start: round_ + 1, ...row })
          aims.push(
            atMost(
              `${checkout.label}: first correction after start ${round_ + 1} / warm median`,
              row["first / warm"],
              2
            )
          )
        } finally {
          await svc.stop()
        }
      }
      // The machine's own share: the bare baseline (node:http and the same
      // INSERT, no key lookup to lapse, no warm-up) timed the same way, as
      // many starts, on the first arm's database (svc stopped: PGlite has
      // one owner).
      for (let round_ = 0; checkout === context.checkouts[0] && round_ < rounds; round_++) {
        const bare = await startBaseline("bare", database, key)
        try {
          rows.push({
            svc: armTitle("bare"),
            start: round_ + 1,
            ...(await timeAfterStart(await bare.call<string>("url"), key, traceId))
          })
          await bare.call("close")
        } finally {
          await bare.stop()
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
      `After each start (once /ready answers 200): one POST /v1/feedback with a correction, timed from the client, then ${WARM} more one after another (warm), then ${IDLE} each after ${IDLE_MS} ms of idle (idle key: the key cache's entry has lapsed, as for any key not used for 2 s).`,
      `The bare baseline (node:http and the same INSERT on the same database, its one key in memory) is timed the same way after as many starts of its own: what a pause and a start cost on this machine whatever the server.`
    ]
  }
}
