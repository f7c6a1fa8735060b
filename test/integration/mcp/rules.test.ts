/**
 * The MCP gateway's rules around the calls: sessions in the database
 * (required after `initialize`, unknown or ended ones refused, no standing
 * stream), the upstream server's URL and headers checked on registration,
 * a person's edited arguments used for the run, an approval that
 * expires, and an upstream that hangs holding only its organization's
 * upstream calls.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { CallToolResultSchema, CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js"
import { Duration, Effect, Layer } from "effect"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { mcpUpstream } from "../../support/mcpUpstream.ts"
import { loopbackTargets, TestTls } from "../../support/tls.ts"

const service = Layer.unwrap(Effect.gen(function*() {
  const tls = yield* TestTls.shared
  return SvcTest.layer({
    config: {
      ...loopbackTargets(tls),
      mcp: {
        upstreamTimeout: Duration.seconds(5),
        upstreamMaxBytes: 64 * 1024,
        upstreamsPerOrg: 1,
        approvalWait: Duration.seconds(0),
        maxServersPerOrg: 2
      }
    }
  })
}))

const post = (baseUrl: string, key: string, body: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(() =>
    fetch(`${baseUrl}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...headers
      },
      body: JSON.stringify(body)
    })
  )

const initialize = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } }
}
const listTools = { jsonrpc: "2.0", id: 2, method: "tools/list" }
const callTool = { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "tools__echo", arguments: {} } }

const textOf = (result: { content?: ReadonlyArray<unknown> }) =>
  (result.content ?? []).map((item) => (item as { text?: string }).text ?? "").join("")

layer(service, { excludeTestServices: true })("the MCP gateway's rules", (it) => {
  describe("sessions", () => {
    it.effect("initialize answers an Mcp-Session-Id; later requests without it are 400, with an unknown one 404, after DELETE 404; GET is 405", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const opened = yield* post(svc.baseUrl, org.key, initialize)
        assert.strictEqual(opened.status, 200)
        const sessionId = opened.headers.get("mcp-session-id")
        assert.match(sessionId ?? "", /^[0-9a-f-]{36}$/)
        yield* Effect.promise(() => opened.text())
        const headers = { "mcp-protocol-version": "2025-11-25" }
        assert.strictEqual((yield* post(svc.baseUrl, org.key, listTools, headers)).status, 400)
        assert.strictEqual(
          (yield* post(svc.baseUrl, org.key, listTools, {
            ...headers,
            "mcp-session-id": "0192f4a0-7c1e-7a2b-9c3d-4e5f60718293"
          })).status,
          404
        )
        const listed = yield* post(svc.baseUrl, org.key, listTools, { ...headers, "mcp-session-id": sessionId! })
        assert.strictEqual(listed.status, 200)
        yield* Effect.promise(() => listed.text())
        // A call naming a server the organization does not have, in an open session: an unknown tool.
        const unknown = yield* post(svc.baseUrl, org.key, callTool, { ...headers, "mcp-session-id": sessionId! })
        assert.strictEqual(unknown.status, 200)
        assert.include(yield* Effect.promise(() => unknown.text()), "Unknown tool: tools__echo")
        // Another organization's key does not reach this session, nor a call naming a server (checked together).
        const stranger = yield* SvcTest.org()
        for (const body of [listTools, callTool]) {
          assert.strictEqual(
            (yield* post(svc.baseUrl, stranger.key, body, { ...headers, "mcp-session-id": sessionId! })).status,
            404
          )
        }
        // The MCP session is an agent session of the organization.
        const session = yield* org.client.agentSessions.get({ params: { session_id: sessionId! }, query: {} })
        assert.strictEqual(session.id, sessionId)
        const ended = yield* Effect.promise(() =>
          fetch(`${svc.baseUrl}/mcp`, {
            method: "DELETE",
            headers: { authorization: `Bearer ${org.key}`, "mcp-session-id": sessionId! }
          })
        )
        assert.strictEqual(ended.status, 200)
        for (const body of [listTools, callTool]) {
          assert.strictEqual(
            (yield* post(svc.baseUrl, org.key, body, { ...headers, "mcp-session-id": sessionId! })).status,
            404
          )
        }
        const get = yield* Effect.promise(() =>
          fetch(`${svc.baseUrl}/mcp`, { headers: { authorization: `Bearer ${org.key}` } })
        )
        assert.strictEqual(get.status, 405)
        const anonymous = yield* Effect.promise(() => fetch(`${svc.baseUrl}/mcp`, { method: "POST", body: "{}" }))
        assert.strictEqual(anonymous.status, 401)
        assert.include(anonymous.headers.get("www-authenticate") ?? "", "Bearer")
      }))
  })

  describe("registering upstream servers", () => {
    it.effect("a non-public URL is INVALID_URL, the client's own headers INVALID_HEADERS, a second name 400, past the cap LIMIT_REACHED", () =>
      Effect.scoped(Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpUpstream()
        const org = yield* SvcTest.org()
        const privateUrl = yield* org.client.mcpServers.create({ payload: { name: "a", url: "https://10.0.0.1/mcp" } })
          .pipe(Effect.flip)
        assert.strictEqual(privateUrl._tag, "InvalidUrl")
        // The schema refuses the MCP client's own headers (the typed client checks it before sending).
        const own = yield* Effect.promise(() =>
          fetch(`${svc.baseUrl}/v1/mcp-servers`, {
            method: "POST",
            headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
            body: JSON.stringify({ name: "a", url: upstream.url, headers: { "Mcp-Session-Id": "x" } })
          }).then((answer) => answer.json())
        )
        assert.strictEqual(own.code, "INVALID_HEADERS")
        yield* org.client.mcpServers.create({ payload: { name: "a", url: upstream.url } })
        const twice = yield* org.client.mcpServers.create({ payload: { name: "a", url: upstream.url } }).pipe(
          Effect.flip
        )
        assert.strictEqual(twice._tag, "InvalidRequest")
        yield* org.client.mcpServers.create({ payload: { name: "b", url: upstream.url } })
        const third = yield* org.client.mcpServers.create({ payload: { name: "c", url: upstream.url } }).pipe(
          Effect.flip
        )
        assert.strictEqual(third._tag, "LimitReached")
        const invalidName = yield* Effect.promise(() =>
          fetch(`${svc.baseUrl}/v1/mcp-servers`, {
            method: "POST",
            headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
            body: JSON.stringify({ name: "a__b", url: upstream.url })
          }).then((answer) => answer.json())
        )
        assert.deepStrictEqual([invalidName.code, invalidName.field], ["INVALID_REQUEST", "name"])
        const [first] = (yield* org.client.mcpServers.list()).mcp_servers
        yield* org.client.mcpServers.remove({ params: { id: first!.id } })
        const gone = yield* org.client.mcpServers.get({ params: { id: first!.id } }).pipe(Effect.flip)
        assert.strictEqual(gone._tag, "NotFound")
      })))
  })

  describe("upstream calls in flight", () => {
    it.effect("past SVC_MCP_UPSTREAM_CALLS_PER_ORG a call is a tool error at once; another organization's calls still run", () =>
      Effect.scoped(Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpUpstream()
        const connected = (org: TestOrg) =>
          Effect.promise(async () => {
            const client = new Client({ name: "bound", version: "1" })
            await client.connect(
              new StreamableHTTPClientTransport(new URL(`${svc.baseUrl}/mcp`), {
                requestInit: { headers: { authorization: `Bearer ${org.key}` } }
              })
            )
            return client
          })
        const register = (org: TestOrg) =>
          Effect.gen(function*() {
            yield* org.client.mcpServers.create({
              payload: { name: "ops", url: upstream.url, default_action_class: "ops.read" }
            })
            yield* org.client.approvalPolicies.put({
              params: { action_class: "ops.read" },
              payload: { mode: "allow", review_seconds: 60, expiring_notice_seconds: 0, timeout_action: "reject" }
            })
          })
        const busy = yield* SvcTest.org()
        const other = yield* SvcTest.org()
        yield* register(busy)
        yield* register(other)
        const busyClient = yield* connected(busy)
        const hanging = busyClient.callTool({ name: "ops__hang", arguments: {} })
        yield* Effect.promise(async () => {
          while (!upstream.calls.some((c) => c.tool === "hang")) await new Promise((resolve) => setTimeout(resolve, 20))
        })
        const refused = yield* Effect.promise(() =>
          busyClient.callTool({ name: "ops__echo", arguments: { text: "a" } })
        )
        assert.isTrue(refused.isError)
        assert.include(textOf(refused as any), "SVC_MCP_UPSTREAM_CALLS_PER_ORG")
        const otherClient = yield* connected(other)
        const ran = yield* Effect.promise(() => otherClient.callTool({ name: "ops__echo", arguments: { text: "b" } }))
        assert.strictEqual(textOf(ran as any), "echo: b")
        const hung = yield* Effect.promise(() => hanging)
        assert.include(textOf(hung as any), "SVC_MCP_UPSTREAM_TIMEOUT")
        yield* Effect.promise(() => Promise.all([busyClient.close(), otherClient.close()]))
      })))
  })

  describe("decisions that change the run", () => {
    it.effect("a person's edited arguments are the ones the upstream tool runs with; an approval that expires fails the task", () =>
      Effect.scoped(Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpUpstream()
        const org = yield* SvcTest.org()
        yield* org.client.mcpServers.create({
          payload: {
            name: "ops",
            url: upstream.url,
            tool_action_classes: { deploy: "ops.deploy", delete_all: "ops.purge" }
          }
        })
        yield* org.client.approvalPolicies.put({
          params: { action_class: "ops.deploy" },
          payload: {
            mode: "require_approval",
            review_seconds: 600,
            expiring_notice_seconds: 0,
            timeout_action: "reject",
            arguments_schema: { type: "object", properties: { text: { type: "string" } } }
          }
        })
        yield* org.client.approvalPolicies.put({
          params: { action_class: "ops.purge" },
          payload: { mode: "require_approval", review_seconds: 1, expiring_notice_seconds: 0, timeout_action: "reject" }
        })
        const client = new Client({ name: "rules", version: "1" })
        yield* Effect.promise(() =>
          client.connect(
            new StreamableHTTPClientTransport(new URL(`${svc.baseUrl}/mcp`), {
              requestInit: { headers: { authorization: `Bearer ${org.key}` } }
            })
          )
        )
        const deploy = yield* Effect.promise(() =>
          client.request({
            method: "tools/call",
            params: { name: "ops__deploy", arguments: { text: "prod" }, task: {} }
          }, CreateTaskResultSchema)
        )
        const approvalId = /approval ([0-9a-f-]{36})/.exec(deploy.task.statusMessage ?? "")![1]!
        yield* org.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "approve", arguments: { text: "staging" } }
        })
        const ran = yield* Effect.promise(() =>
          client.experimental.tasks.getTaskResult(deploy.task.taskId, CallToolResultSchema)
        )
        assert.strictEqual(textOf(ran as any), "done deploy {\"text\":\"staging\"}")
        const approval = yield* org.client.approvals.get({ params: { approval_id: approvalId } })
        const session = yield* org.client.agentSessions.get({ params: { session_id: approval.session_id }, query: {} })
        assert.strictEqual(session.steps[0]!.outcome?.status, "succeeded")

        const purge = yield* Effect.promise(() =>
          client.request(
            { method: "tools/call", params: { name: "ops__delete_all", arguments: {}, task: {} } },
            CreateTaskResultSchema
          )
        )
        const expired = yield* Effect.promise(() =>
          client.experimental.tasks.getTaskResult(purge.task.taskId, CallToolResultSchema)
        )
        assert.isTrue(expired.isError)
        assert.include(textOf(expired as any), "expired")
        assert.deepStrictEqual(upstream.calls.map((call) => call.tool), ["deploy"])
        yield* Effect.promise(() => client.close())
      })))
  })
})
