/**
 * A governed MCP call outlives the process that took it: with two service
 * processes on one PostgreSQL server, a task opened through one is read,
 * once approved, through the other after the first has stopped, and the
 * tool runs once.
 */
import { assert, describe, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { CallToolResultSchema, CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import { mcpUpstream } from "../../support/mcpUpstream.ts"
import { cli, type RunningServer, scratchDatabaseUrl, startServers } from "../../support/process.ts"
import { TestTls } from "../../support/tls.ts"

const call = async (server: RunningServer, key: string, method: string, route: string, body: unknown) => {
  const response = await fetch(`${server.baseUrl}${route}`, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  const text = await response.text()
  if (response.status >= 300) throw new Error(`${method} ${route}: ${response.status} ${text}`)
  return JSON.parse(text)
}

const connect = async (server: RunningServer, key: string) => {
  const client = new Client({ name: "processes", version: "1" })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${server.baseUrl}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${key}` } }
    })
  )
  return client
}

describe.runIf(process.env.TEST_DATABASE_URL)("MCP calls with two service processes on one PostgreSQL server", () => {
  it.live(
    "a task opened through one process is answered through the other once approved, after the first stopped",
    () =>
      Effect.gen(function*() {
        const tls = yield* TestTls.shared
        const upstream = yield* mcpUpstream()
        const url = yield* scratchDatabaseUrl("svc_mcp")
        const env = {
          DATABASE_URL: url,
          SVC_MASTER_KEY: Buffer.alloc(32, 9).toString("base64"),
          SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8",
          SVC_EXTRA_CA_FILE: tls.caFile
        }
        const key = yield* Effect.promise(async () => {
          const org = JSON.parse((await cli(["orgs", "create", "--name", "mcp", "--json"], env)).stdout.trim())
          const created = await cli([
            "keys",
            "create",
            "--org",
            org.id,
            "--scopes",
            "org_config.write,agents.read,approvals.decide,mcp.use",
            "--json"
          ], env)
          return JSON.parse(created.stdout.trim()).key as string
        })
        const [a, b] = (yield* startServers(env, 2)) as [RunningServer, RunningServer]
        const result = yield* Effect.promise(async () => {
          await call(a, key, "POST", "/v1/mcp-servers", {
            name: "ops",
            url: upstream.url,
            default_action_class: "ops.deploy"
          })
          await call(a, key, "PUT", "/v1/approval-policies/ops.deploy", {
            mode: "require_approval",
            review_seconds: 600,
            expiring_notice_seconds: 0,
            timeout_action: "reject"
          })
          const first = await connect(a, key)
          const { task } = await first.request(
            { method: "tools/call", params: { name: "ops__deploy", arguments: { text: "v9" }, task: {} } },
            CreateTaskResultSchema
          )
          a.child.kill("SIGTERM")
          await a.exited.catch(() => undefined)
          const approvalId = /approval ([0-9a-f-]{36})/.exec(task.statusMessage ?? "")![1]!
          await call(b, key, "POST", `/v1/agent-approvals/${approvalId}/decision`, { decision: "approve" })
          const second = await connect(b, key)
          const answer = await second.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)
          await second.close()
          return answer
        })
        assert.strictEqual((result.content[0] as { text: string }).text, "done deploy {\"text\":\"v9\"}")
        assert.strictEqual(upstream.calls.length, 1)
      }).pipe(Effect.scoped),
    120_000
  )
})
