/**
 * The warm-up of a start (`src/feedback/WarmStart.ts`, `src/server/WarmRequest.ts`):
 * on a database with a task and a run, a restarted server rehearses the
 * feedback submit (the run's answer as its correction) in rolled-back
 * transactions and sends requests through its own application before it
 * listens. Nothing of it stays or shows:
 * no feedback, no request log line, no warning; the first
 * client's feedback is then the only one.
 */
import { assert, describe, it } from "@effect/vitest"
import { onServerRun } from "../../support/databases.ts"
import { cli, type RunningServer, seededDataDir, startServer } from "../../support/process.ts"

const START_MS = 150_000
const TEST_MS = 300_000

const json = (stdout: string) => JSON.parse(stdout.trim().split("\n").at(-1)!)

const stop = async (server: RunningServer) => {
  server.child.kill("SIGTERM")
  return server.exited
}

describe.skipIf(onServerRun)("warm start", () => {
  it("a restart on a database with a task and a run leaves no feedback and no log line of its warm-up", async () => {
    // Already migrated: what is tested is the second start, not the first.
    const dataDir = seededDataDir("svc-warm-")
    const env = { SVC_DATA_DIR: dataDir, DATABASE_URL: "", SVC_WARM_START: "true" }
    const first = await startServer(env, START_MS)
    let key: string
    let traceId: string
    const api = async (server: RunningServer, method: string, route: string, body?: unknown) => {
      const response = await fetch(`${server.baseUrl}${route}`, {
        method,
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) })
      })
      return { status: response.status, json: await response.json() as any }
    }
    try {
      const org = json((await cli(["orgs", "create", "--name", "warm", "--json"], env)).stdout)
      key = json(
        (await cli([
          "keys",
          "create",
          "--org",
          org.id,
          "--scopes",
          "tasks.write,tasks.read,feedback.write,feedback.read",
          "--json"
        ], env)).stdout
      ).key
      const task = await api(first, "POST", "/v1/tasks", {
        name: "warm",
        answer_schema: { type: "object", properties: { a: { type: "string" } } }
      })
      assert.strictEqual(task.status, 201)
      const run = await api(first, "POST", `/v1/tasks/${task.json.id}/runs`, { input: { q: 1 }, answer: { a: "x" } })
      assert.strictEqual(run.status, 201)
      traceId = run.json.trace_id
    } finally {
      assert.strictEqual(await stop(first), 0)
    }
    const second = await startServer(env, START_MS)
    try {
      const startLog = second.output()
      assert.notInclude(startLog, "did not finish")
      assert.notInclude(startLog, "\"message\":\"request\"")
      const before = await api(second, "GET", "/v1/feedback")
      assert.strictEqual(before.status, 200)
      assert.deepStrictEqual(before.json.feedback, [])
      const submitted = await api(second, "POST", "/v1/feedback", {
        inference_log_id: traceId,
        score: -1,
        correction: { a: "y" }
      })
      assert.strictEqual(submitted.status, 201)
      const after = await api(second, "GET", "/v1/feedback")
      assert.deepStrictEqual(after.json.feedback.map((item: { id: string }) => item.id), [submitted.json.id])
    } finally {
      assert.strictEqual(await stop(second), 0)
    }
  }, TEST_MS)
})
