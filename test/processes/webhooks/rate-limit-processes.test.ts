/**
 * An endpoint's rate limit with two service processes on one PostgreSQL
 * server: approvals opened through both, the deliveries sent by whichever
 * process claims them, and the receiver still sees at most the burst plus
 * the rate (the budget is in the database, not in a process).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { HttpsReceiver } from "../../support/HttpsReceiver.ts"
import { cli, type RunningServer, scratchDatabaseUrl, startServers } from "../../support/process.ts"
import { TestTls } from "../../support/tls.ts"

const RATE = 4
const N = 16

const call = async (server: RunningServer, key: string, method: string, route: string, body?: unknown) => {
  const response = await fetch(`${server.baseUrl}${route}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  if (response.status >= 300) throw new Error(`${method} ${route}: ${response.status} ${text}`)
  return text === "" ? undefined : JSON.parse(text)
}

describe.runIf(process.env.TEST_DATABASE_URL)("an endpoint's rate limit with two service processes", () => {
  it.live(
    "a burst opened through both processes reaches the receiver at the endpoint's rate",
    () =>
      Effect.gen(function*() {
        const tls = yield* TestTls.shared
        const receiver = yield* HttpsReceiver.make()
        const env = {
          DATABASE_URL: yield* scratchDatabaseUrl("svc_rate_limit"),
          SVC_MASTER_KEY: Buffer.alloc(32, 9).toString("base64"),
          SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8",
          SVC_EXTRA_CA_FILE: tls.caFile
        }
        const key = yield* Effect.promise(async () => {
          const org = JSON.parse((await cli(["orgs", "create", "--name", "rate", "--json"], env)).stdout.trim())
          const created = await cli([
            "keys",
            "create",
            "--org",
            org.id,
            "--scopes",
            "org_config.write,agents.write",
            "--json"
          ], env)
          return JSON.parse(created.stdout.trim()).key as string
        })
        const [a, b] = (yield* startServers(env, 2)) as [RunningServer, RunningServer]
        let start = 0
        yield* Effect.promise(async () => {
          await call(a, key, "POST", "/v1/notification-endpoints", {
            url: receiver.url("/limited"),
            events: ["approval.requested"],
            rate_limit: RATE
          })
          await call(a, key, "PUT", "/v1/approval-policies/deploy", {
            mode: "require_approval",
            review_seconds: 600,
            expiring_notice_seconds: 0,
            timeout_action: "reject"
          })
          // Half the approvals through each process, all at once.
          start = Date.now()
          await Promise.all(Array.from({ length: N }, async (_, i) => {
            const server = i % 2 === 0 ? a : b
            const session = await call(server, key, "POST", "/v1/agent-sessions", {})
            await call(server, key, "POST", `/v1/agent-sessions/${session.id}/steps`, {
              step_id: `ship-${i}`,
              tool: "deploy",
              action_class: "deploy",
              arguments: {}
            })
          }))
        })
        const requests = yield* receiver.waitForRequests(N, "40 seconds")
        assert.strictEqual(requests.length, N)
        const JITTER_S = 0.5
        for (let i = 0; i < requests.length; i++) {
          for (let j = i; j < requests.length; j++) {
            const window = (requests[j]!.receivedAt - requests[i]!.receivedAt) / 1000
            assert.isAtMost(
              j - i + 1,
              RATE + Math.floor((window + JITTER_S) * RATE) + 1,
              `${j - i + 1} requests within ${window} s`
            )
          }
        }
        // From the burst's start to the last receipt.
        assert.isAtLeast((requests.at(-1)!.receivedAt - start) / 1000, (N - RATE) / RATE)
      }).pipe(Effect.scoped),
    120_000
  )
})
