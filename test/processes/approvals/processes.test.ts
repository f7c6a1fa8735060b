/**
 * Deadlines are durable. A service restarted after its
 * approvals came due fires them (once each); several service processes on
 * one PostgreSQL server fire each deadline exactly once.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { Database } from "../../../src/database/Database.ts"
import { onServerRun } from "../../support/databases.ts"
import {
  cli,
  type RunningServer,
  scratchDatabaseUrl,
  seededDataDir,
  startServer,
  startServers
} from "../../support/process.ts"
import { openSse } from "../../support/sse.ts"

const SCOPES = "org_config.write,agents.write,agents.read,approvals.decide"

const json = (stdout: string) => JSON.parse(stdout.trim())

const call = async (server: RunningServer, key: string, method: string, route: string, body?: unknown) => {
  const response = await fetch(`${server.baseUrl}${route}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  if (response.status >= 300) throw new Error(`${method} ${route}: ${response.status} ${text}`)
  return JSON.parse(text)
}

/** Polls until `check` returns a value (real time; background work, never a fixed sleep). */
const until = async <A>(check: () => Promise<A | undefined>, what: string, timeoutMs = 30_000): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

const provision = async (env: Record<string, string>) => {
  const org = json((await cli(["orgs", "create", "--name", "deadlines", "--json"], env)).stdout)
  const created = await cli(["keys", "create", "--org", org.id, "--scopes", SCOPES, "--json"], env)
  assert.strictEqual(created.code, 0, created.stderr)
  return json(created.stdout).key as string
}

const eventTypes = (sql: SqlClient.SqlClient) =>
  sql<{ approval_id: string; types: string }>`
    SELECT body::jsonb -> 'approval' ->> 'approval_id' AS approval_id, string_agg(type, ',' ORDER BY seq) AS types
    FROM events GROUP BY 1
  `.pipe(Effect.orDie, Effect.map((rows) => new Map(rows.map((r) => [r.approval_id, r.types]))))

describe.skipIf(onServerRun)("deadlines across restarts (embedded database)", () => {
  it(
    "deadlines that came due while the service was down fire after restart, once each; open streams end at shutdown",
    async () => {
      const dataDir = seededDataDir("svc-deadlines-")
      const env = { SVC_DATA_DIR: dataDir, DATABASE_URL: "" }
      const key = await provision(env)
      const first = await startServer(env)
      let approval: { approval_id: string; expires_at: string }
      try {
        // The first process must be stopped before the earliest deadline
        // (the expiring notice, 4 s after the step; then escalation at 5 s,
        // expiry at 10 s, in the order the last check reads): a 1 s window was missed once
        // under CI's parallel load, with every deadline firing before exit.
        await call(first, key, "PUT", "/v1/approval-policies/deploy", {
          mode: "require_approval",
          review_seconds: 10,
          expiring_notice_seconds: 6,
          escalation_seconds: 5,
          timeout_action: "allow"
        })
        const session = await call(first, key, "POST", "/v1/agent-sessions", {})
        const answer = await call(first, key, "POST", `/v1/agent-sessions/${session.id}/steps`, {
          step_id: "ship",
          tool: "deploy",
          action_class: "deploy",
          arguments: {}
        })
        approval = await call(first, key, "GET", `/v1/agent-approvals/${answer.approval_id}`)
        // An open session stream does not hold the shutdown: it ends cleanly (the client resumes elsewhere).
        const stream = await fetch(`${first.baseUrl}/v1/agent-sessions/${session.id}/events/stream`, {
          headers: { authorization: `Bearer ${key}` }
        })
        const reader = stream.body!.getReader()
        await reader.read()
        first.child.kill("SIGTERM")
        for (;;) {
          const chunk = await reader.read()
          if (chunk.done) break
        }
      } finally {
        first.child.kill("SIGTERM")
        assert.strictEqual(await first.exited, 0)
      }

      const typesNow = () =>
        Effect.runPromise(
          Effect.gen(function*() {
            return yield* eventTypes(yield* SqlClient.SqlClient)
          }).pipe(Effect.provide(Database.embedded(dataDir)), Effect.scoped)
        )

      assert.strictEqual(
        (await typesNow()).get(approval.approval_id),
        "approval.requested",
        "stopped before any deadline"
      )
      // The service stays down until every deadline has passed.
      while (Date.now() <= new Date(approval.expires_at).getTime() + 200) {
        await new Promise((resolve) => setTimeout(resolve, 100))
      }

      const second = await startServer(env)
      try {
        const expired = await until(async () => {
          const snapshot = await call(second, key, "GET", `/v1/agent-approvals/${approval.approval_id}`)
          return snapshot.status === "expired" ? snapshot : undefined
        }, "expiry after restart")
        assert.strictEqual(expired.timeout_action, "allow")
      } finally {
        second.child.kill("SIGTERM")
        assert.strictEqual(await second.exited, 0)
      }
      assert.strictEqual(
        (await typesNow()).get(approval.approval_id),
        "approval.requested,approval.expiring,approval.escalated,approval.expired"
      )
      // Five process starts: room for a loaded machine.
    },
    300_000
  )
})

describe.runIf(process.env.TEST_DATABASE_URL)("deadlines with two service processes on one PostgreSQL server", () => {
  it.live(
    "every deadline fires exactly once; a decision through one process wakes a stream on the other",
    () =>
      Effect.gen(function*() {
        const url = yield* scratchDatabaseUrl("svc_deadlines")
        // Streams re-read only every minute: a live event from the other process can only come through NOTIFY.
        const env = {
          DATABASE_URL: url,
          SVC_MASTER_KEY: Buffer.alloc(32, 9).toString("base64"),
          SVC_SSE_POLL_MS: "60000"
        }
        const key = yield* Effect.promise(() => provision(env))
        const [a, b] = (yield* startServers(env, 2)) as [RunningServer, RunningServer]
        yield* Effect.promise(() =>
          call(a, key, "PUT", "/v1/approval-policies/ops", {
            mode: "require_approval",
            review_seconds: 2,
            expiring_notice_seconds: 1,
            escalation_seconds: 1,
            timeout_action: "reject"
          })
        )
        const ids = yield* Effect.promise(async () => {
          const out: Array<string> = []
          for (let i = 0; i < 24; i++) {
            const server = i % 2 === 0 ? a : b
            const session = await call(server, key, "POST", "/v1/agent-sessions", {})
            const answer = await call(server, key, "POST", `/v1/agent-sessions/${session.id}/steps`, {
              step_id: `s${i}`,
              tool: "kubectl",
              action_class: "ops",
              arguments: { i }
            })
            out.push(answer.approval_id)
          }
          return out
        })
        const sql = yield* PgClient.makeClient({ url: Redacted.make(url) }).pipe(Effect.provide(Reactivity.layer))
        const types = yield* Effect.promise(() =>
          until(async () => {
            const found = await Effect.runPromise(eventTypes(sql))
            return ids.every((id) => found.get(id)?.endsWith("approval.expired")) ? found : undefined
          }, "every approval expired")
        )
        for (const id of ids) {
          assert.strictEqual(
            types.get(id),
            "approval.requested,approval.expiring,approval.escalated,approval.expired",
            id
          )
        }
        const steps = yield* sql<{ resolution: string }>`SELECT DISTINCT resolution FROM agent_steps`.pipe(Effect.orDie)
        assert.deepStrictEqual(steps.map((s) => s.resolution), ["reject"])

        // A decision taken through one process reaches a stream open on the other at once.
        const live = yield* Effect.promise(async () => {
          const session = await call(a, key, "POST", "/v1/agent-sessions", {})
          const answer = await call(a, key, "POST", `/v1/agent-sessions/${session.id}/steps`, {
            step_id: "manual",
            tool: "kubectl",
            action_class: "manual",
            arguments: {}
          })
          const sse = await openSse(`${a.baseUrl}/v1/agent-sessions/${session.id}/events/stream`, { key })
          try {
            await sse.events(1)
            await call(b, key, "POST", `/v1/agent-approvals/${answer.approval_id}/decision`, { decision: "approve" })
            return await sse.events(1, 8_000)
          } finally {
            sse.close()
          }
        })
        assert.strictEqual(live[0]!.event, "approval:decided")
      }).pipe(Effect.scoped),
    120_000
  )
})

describe.runIf(process.env.TEST_DATABASE_URL)(
  "approval policies with two service processes on one PostgreSQL server",
  () => {
    it.live(
      "a policy set through one process answers the next step through the other, at once and after its cache was warm",
      () =>
        Effect.gen(function*() {
          const url = yield* scratchDatabaseUrl("svc_policies")
          const env = { DATABASE_URL: url, SVC_MASTER_KEY: Buffer.alloc(32, 7).toString("base64") }
          const key = yield* Effect.promise(() => provision(env))
          const [a, b] = (yield* startServers(env, 2)) as [RunningServer, RunningServer]
          const answers = yield* Effect.promise(async () => {
            const session = await call(b, key, "POST", "/v1/agent-sessions", {})
            let n = 0
            const stepOnB = async () =>
              (await call(b, key, "POST", `/v1/agent-sessions/${session.id}/steps`, {
                step_id: `s${n++}`,
                tool: "deploy",
                action_class: "deploy",
                arguments: {}
              })).decision as string
            const policy = (mode: string) => ({
              mode,
              review_seconds: 60,
              expiring_notice_seconds: 0,
              timeout_action: "reject"
            })
            const out: Array<string> = []
            // B knows the class without a policy (its cache is warm), then A sets one: B's next step follows it.
            out.push(await stepOnB())
            out.push(await stepOnB())
            for (const mode of ["allow", "reject", "allow"]) {
              await call(a, key, "PUT", "/v1/approval-policies/deploy", policy(mode))
              out.push(await stepOnB())
            }
            return out
          })
          assert.deepStrictEqual(answers, ["pending", "pending", "allow", "reject", "allow"])
        }).pipe(Effect.scoped),
      120_000
    )
  }
)
