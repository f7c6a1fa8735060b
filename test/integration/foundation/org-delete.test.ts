/**
 * `orgs delete --id ORG_ID` deletes an organization and every row of its
 * data in one transaction (docs/operations.md, "Deleting an
 * organization"): afterwards no table holds a row of it, its keys are
 * refused, and another organization keeps everything it had.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { runCommand } from "../../../src/cli/AdminChannel.ts"
import { ConsoleSessions } from "../../../src/console/ConsoleSessions.ts"
import { Identity } from "../../../src/identity/Identity.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"

/** Rows of `orgId` in every table that has an `org_id`, and in the two that hang off others without one. */
const rowsOf = (orgId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const tables = yield* sql<{ table_name: string }>`
      SELECT table_name FROM information_schema.columns
      WHERE table_schema = current_schema() AND column_name = 'org_id' ORDER BY table_name
    `
    const counts: Record<string, number> = {}
    for (const { table_name } of tables) {
      const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql(table_name)} WHERE org_id = ${orgId}`
      counts[table_name] = row!.n
    }
    const [examples] = yield* sql<{ n: number }>`
      SELECT count(*)::int AS n FROM dataset_examples e JOIN datasets d ON d.id = e.dataset_id WHERE d.org_id = ${orgId}
    `
    counts.dataset_examples = examples!.n
    const [orgs] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM orgs WHERE id = ${orgId}`
    counts.orgs = orgs!.n
    return counts
  })

/** An organization with something in most of its tables: a task, a run, feedback, a dataset, an endpoint, a session with a pending approval, a policy, a console link. */
const populated = Effect.gen(function*() {
  const org: TestOrg = yield* SvcTest.org()
  const task = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: { type: "object" } } })
  const run = yield* org.client.tasks.logRun({ params: { task_id: task.id }, payload: { input: "q", answer: {} } })
  yield* org.client.feedback.submit({ payload: { inference_log_id: run.trace_id, score: 1, correction: { a: 1 } } })
  yield* org.client.notifications.create({ payload: { url: "https://127.0.0.1:9/hook" } })
  const session = yield* org.client.agentSessions.create({ payload: {} })
  yield* org.client.agentSessions.governStep({
    params: { session_id: session.id },
    payload: { step_id: "s1", tool: "t", action_class: "payments.refund", arguments: {} }
  })
  const login = yield* runCommand([
    "console",
    "login",
    "--org",
    org.orgId,
    "--preset",
    "admin",
    "--name",
    "Ada",
    "--json"
  ])
  assert.strictEqual(login.code, 0, login.stderr)
  // The approval's event reaches the endpoint's queue in the background and
  // its first attempt (refused: nothing listens on port 9) is settled: after
  // this only the test changes the organization's rows (the next attempt is
  // an hour away, `webhookRetrySchedule` below).
  const sql = yield* SqlClient.SqlClient
  for (let polls = 0;; polls++) {
    const [row] = yield* sql<{ n: number }>`
      SELECT count(*)::int AS n FROM deliveries WHERE org_id = ${org.orgId} AND attempts >= 1 AND lease_owner IS NULL
    `
    if (row!.n > 0) break
    assert.isBelow(polls, 400, "the approval's delivery was never attempted")
    yield* Effect.sleep("50 millis")
  }
  return org
})

const Services = Layer.mergeAll(Identity.layer, ConsoleSessions.layer, NodeServices.layer).pipe(
  Layer.provideMerge(
    SvcTest.layer({ config: { allowedTargetCidrs: ["127.0.0.0/8"], webhookRetrySchedule: [Duration.hours(1)] } })
  )
)

layer(Services, { excludeTestServices: true })("deleting an organization", (it) => {
  describe("orgs delete --id ORG_ID", () => {
    it.effect("removes every row of the organization in one transaction, refuses its keys, and leaves another organization whole", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const doomed = yield* populated
        const kept = yield* populated
        const before = yield* rowsOf(doomed.orgId)
        const keptBefore = yield* rowsOf(kept.orgId)
        // The data is there to delete: most tables hold some of it.
        assert.isAtLeast(Object.values(before).filter((n) => n > 0).length, 10, JSON.stringify(before))
        // The key works, and is now known to the service's key cache.
        assert.strictEqual(
          (yield* raw(`${svc.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${doomed.key}` } })).status,
          200
        )

        const answer = yield* runCommand(["orgs", "delete", "--id", doomed.orgId, "--json"])
        assert.strictEqual(answer.code, 0, answer.stderr)
        assert.deepStrictEqual(JSON.parse(answer.stdout), { id: doomed.orgId, deleted: true, keys: 1 })

        const after = yield* rowsOf(doomed.orgId)
        assert.deepStrictEqual(
          Object.entries(after).filter(([, n]) => n > 0),
          [],
          "no table keeps a row of the deleted organization"
        )
        // Refused at once by the process that deleted it.
        const refused = yield* raw(`${svc.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${doomed.key}` } })
        assert.strictEqual(refused.status, 401)
        assert.strictEqual(refused.json.code, "UNAUTHENTICATED")

        assert.deepStrictEqual(yield* rowsOf(kept.orgId), keptBefore, "the other organization keeps every row")
        assert.strictEqual(
          (yield* raw(`${svc.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${kept.key}` } })).status,
          200
        )
      }))

    it.effect("an unknown organization is an error, exit status 1, naming it", () =>
      Effect.gen(function*() {
        const answer = yield* runCommand(["orgs", "delete", "--id", "00000000-0000-4000-8000-000000000000"])
        assert.strictEqual(answer.code, 1)
        assert.include(answer.stderr, "no organization 00000000-0000-4000-8000-000000000000")
      }))
  })
})
