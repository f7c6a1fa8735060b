/**
 * The MCP gateway end to end: the official SDK's client against svc's
 * `/mcp`, svc against an upstream server built with the SDK's server on
 * HTTPS loopback. Every call is a governed step: allowed calls run,
 * refused ones do not, reviewed ones wait (as a task, or for a bounded
 * time) until a person decides through the REST API.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { CallToolResultSchema, CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js"
import { Duration, Effect, Fiber, Layer } from "effect"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { eventually } from "../../support/http.ts"
import { mcpUpstream } from "../../support/mcpUpstream.ts"
import { loopbackTargets, TestTls } from "../../support/tls.ts"

const service = Layer.unwrap(Effect.gen(function*() {
  const tls = yield* TestTls.shared
  return SvcTest.layer({
    config: {
      ...loopbackTargets(tls),
      mcp: {
        upstreamTimeout: Duration.seconds(2),
        upstreamMaxBytes: 64 * 1024,
        upstreamsPerOrg: 16,
        approvalWait: Duration.seconds(1),
        maxServersPerOrg: 50
      }
    }
  })
}))

const connect = (baseUrl: string, key: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new Client({ name: "gateway-test", version: "1.0.0" })
      const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${key}` } }
      })
      await client.connect(transport)
      return { client, transport }
    }),
    ({ client }) => Effect.promise(() => client.close())
  )

const textOf = (result: { content?: ReadonlyArray<unknown> }) =>
  (result.content ?? []).map((item) => (item as { text?: string }).text ?? "").join("")

/** An organization with the upstream registered as `tools` and a policy per action class. */
const organization = (url: string) =>
  Effect.gen(function*() {
    const org = yield* SvcTest.org()
    yield* org.client.mcpServers.create({
      payload: {
        name: "tools",
        url,
        headers: { Authorization: "Bearer upstream-secret-7f3a" },
        default_action_class: "mcp.read",
        tool_action_classes: { delete_all: "mcp.danger", deploy: "mcp.review", short: "mcp.short" }
      }
    })
    const policy = (action_class: string, mode: "allow" | "reject" | "require_approval", review_seconds = 600) =>
      org.client.approvalPolicies.put({
        params: { action_class },
        payload: { mode, review_seconds, expiring_notice_seconds: 0, timeout_action: "reject" }
      })
    yield* policy("mcp.read", "allow")
    yield* policy("mcp.danger", "reject")
    yield* policy("mcp.review", "require_approval")
    return org
  })

const approvalOf = (text: string) => /approval ([0-9a-f-]{36})/.exec(text)?.[1]

const decide = (org: TestOrg, approvalId: string, decision: "approve" | "reject") =>
  org.client.approvals.decide({ params: { approval_id: approvalId }, payload: { decision } })

layer(service, { excludeTestServices: true })("the MCP gateway", (it) => {
  describe("listing and allowed calls", () => {
    it.effect("tools/list names each upstream tool <server>__<tool> with its action class; an allowed call runs upstream with the server's headers", () =>
      Effect.scoped(Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpUpstream()
        const org = yield* organization(upstream.url)
        const { client, transport } = yield* connect(svc.baseUrl, org.key)
        const { tools } = yield* Effect.promise(() => client.listTools())
        const echo = tools.find((tool) => tool.name === "tools__echo")
        assert.isDefined(echo)
        assert.strictEqual(echo!._meta?.["svc/action_class"], "mcp.read")
        assert.strictEqual(
          tools.find((tool) => tool.name === "tools__deploy")!._meta?.["svc/action_class"],
          "mcp.review"
        )
        assert.strictEqual(echo!.execution?.taskSupport, "optional")

        const result = yield* Effect.promise(() => client.callTool({ name: "tools__echo", arguments: { text: "hi" } }))
        assert.strictEqual(textOf(result as any), "echo: hi")
        assert.strictEqual(upstream.calls.length, 1)
        assert.strictEqual(upstream.calls[0]!.headers["authorization"], "Bearer upstream-secret-7f3a")

        // The call is a governed step of the MCP session's agent session, with its outcome.
        const session = yield* org.client.agentSessions.get({ params: { session_id: transport.sessionId! }, query: {} })
        assert.strictEqual(session.steps.length, 1)
        assert.strictEqual(session.steps[0]!.tool, "tools__echo")
        assert.strictEqual(session.steps[0]!.decision, "allow")
        assert.strictEqual(session.steps[0]!.outcome?.status, "succeeded")
        // The session's events are those of a REST step and its reported outcome, the same JSON.
        const events = yield* svc.sql<{ name: string; data: string }>`
          SELECT name, data FROM session_events WHERE session_id = ${transport.sessionId!} ORDER BY seq
        `
        assert.deepStrictEqual(events.map((e) => e.name), ["step:governed", "tool:succeeded"])
        assert.deepStrictEqual(JSON.parse(events[1]!.data), {
          step_id: session.steps[0]!.step_id,
          tool: "tools__echo",
          status: "succeeded",
          result: session.steps[0]!.outcome!.result,
          reported_at: session.steps[0]!.outcome!.reported_at
        })
        assert.deepStrictEqual(Object.keys(JSON.parse(events[1]!.data)), [
          "step_id",
          "tool",
          "status",
          "result",
          "reported_at"
        ])
        // The upstream's credential is never answered, nor logged.
        const read = yield* org.client.mcpServers.list()
        assert.deepStrictEqual(read.mcp_servers[0]!.headers, ["Authorization"])
        assert.notInclude(JSON.stringify(read), "upstream-secret-7f3a")
        assert.notInclude(svc.logLines().join("\n"), "upstream-secret-7f3a")
      })))

    it.effect("the test call lists the server's tools with their gateway names and action classes", () =>
      Effect.scoped(Effect.gen(function*() {
        const upstream = yield* mcpUpstream()
        const org = yield* organization(upstream.url)
        const [server] = (yield* org.client.mcpServers.list()).mcp_servers
        const tested = yield* org.client.mcpServers.test({ params: { id: server!.id } })
        const deleteAll = tested.tools.find((tool) => tool.name === "delete_all")
        assert.deepStrictEqual({ exposed_as: deleteAll?.exposed_as, action_class: deleteAll?.action_class }, {
          exposed_as: "tools__delete_all",
          action_class: "mcp.danger"
        })
      })))
  })

  describe("upstream sessions", () => {
    it.effect("calls to one server share the process's upstream session; one the server forgot (404) is replaced and the call runs once", () =>
      Effect.scoped(Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpUpstream({ stateful: true })
        const org = yield* organization(upstream.url)
        const { client } = yield* connect(svc.baseUrl, org.key)
        const call = (text: string) =>
          Effect.promise(() => client.callTool({ name: "tools__echo", arguments: { text } })).pipe(
            Effect.map((result) => textOf(result as { content?: ReadonlyArray<unknown> }))
          )
        assert.strictEqual(yield* call("one"), "echo: one")
        assert.strictEqual(yield* call("two"), "echo: two")
        // Listing the tools takes the same session.
        yield* Effect.promise(() => client.listTools())
        assert.strictEqual(upstream.initialized(), 1)

        upstream.forgetSessions()
        assert.strictEqual(yield* call("three"), "echo: three")
        assert.strictEqual(upstream.initialized(), 2)
        assert.deepStrictEqual(upstream.calls.map((c) => c.arguments["text"]), ["one", "two", "three"])
      })))
  })

  describe("connections the upstream closes", () => {
    it.effect("initialize, initialized and tools/list meeting a reset kept-alive connection are sent once more on another: the server's test and the tools listing succeed", () =>
      Effect.scoped(Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpUpstream()
        const org = yield* organization(upstream.url)
        upstream.resetReused(true)
        const [server] = (yield* org.client.mcpServers.list()).mcp_servers
        const tested = yield* org.client.mcpServers.test({ params: { id: server!.id } })
        assert.include(tested.tools.map((tool) => tool.name), "echo")
        // Its `tools/list` (and `notifications/initialized`, when it follows on the same connection) was met with a reset.
        const afterTest = upstream.resets()
        assert.isAtLeast(afterTest, 1)

        // The kept session opens on the connection the test left idle.
        const { client } = yield* connect(svc.baseUrl, org.key)
        const { tools } = yield* Effect.promise(() => client.listTools())
        assert.include(tools.map((tool) => tool.name), "tools__echo")
        assert.isAbove(upstream.resets(), afterTest)
        assert.strictEqual(upstream.calls.length, 0)
      })))

    it.effect("a tools/call meeting a reset kept-alive connection is a tool error and is never sent again: the tool ran once per call", () =>
      Effect.scoped(Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpUpstream()
        const org = yield* organization(upstream.url)
        const { client } = yield* connect(svc.baseUrl, org.key)
        const call = (text: string) =>
          Effect.promise(() => client.callTool({ name: "tools__echo", arguments: { text } }))
        assert.strictEqual(textOf((yield* call("one")) as any), "echo: one")

        upstream.resetReused(true)
        const reset = yield* call("two")
        assert.isTrue(reset.isError)
        assert.include(textOf(reset as any), "the upstream server could not be reached")
        assert.strictEqual(upstream.resets(), 1)

        upstream.resetReused(false)
        assert.strictEqual(textOf((yield* call("three")) as any), "echo: three")
        assert.deepStrictEqual(upstream.calls.map((c) => c.arguments["text"]), ["one", "three"])
      })))
  })

  describe("refused calls and upstream faults", () => {
    it.effect("a rejected call is a tool error with the reason, and the upstream is never called", () =>
      Effect.scoped(Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpUpstream()
        const org = yield* organization(upstream.url)
        const { client } = yield* connect(svc.baseUrl, org.key)
        const result = yield* Effect.promise(() => client.callTool({ name: "tools__delete_all", arguments: {} }))
        assert.isTrue(result.isError)
        assert.include(textOf(result as any), "mcp.danger")
        assert.strictEqual(upstream.calls.length, 0)
      })))

    it.effect("an upstream tool error, a hang and a flood are tool errors naming the bound, never HTTP errors of svc", () =>
      Effect.scoped(Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpUpstream({ floodBytes: 200_000 })
        const org = yield* organization(upstream.url)
        const { client } = yield* connect(svc.baseUrl, org.key)
        const failed = yield* Effect.promise(() => client.callTool({ name: "tools__fail", arguments: {} }))
        assert.isTrue(failed.isError)
        assert.include(textOf(failed as any), "the disk is full")
        const hung = yield* Effect.promise(() => client.callTool({ name: "tools__hang", arguments: {} }))
        assert.isTrue(hung.isError)
        assert.include(textOf(hung as any), "SVC_MCP_UPSTREAM_TIMEOUT")
        const flooded = yield* Effect.promise(() => client.callTool({ name: "tools__flood", arguments: {} }))
        assert.isTrue(flooded.isError)
        assert.include(textOf(flooded as any), "SVC_MCP_UPSTREAM_MAX_BYTES")
      })))
    it.effect("an allowed call's row is written in its step's commit, running while its tool runs", () =>
      Effect.scoped(Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpUpstream()
        const org = yield* organization(upstream.url)
        const { client, transport } = yield* connect(svc.baseUrl, org.key)
        const hung = yield* Effect.forkScoped(
          Effect.promise(() => client.callTool({ name: "tools__hang", arguments: {} }))
        )
        // The step's event and the call's row were written by one transaction (a restart finds both or neither).
        const rows = yield* eventually(
          Effect.map(
            svc.sql<{ state: string; one_commit: boolean }>`
              SELECT c.state, c.xmin::text = e.xmin::text AS one_commit FROM mcp_calls c
              JOIN session_events e ON e.session_id = c.session_id AND e.name = 'step:governed'
              WHERE c.session_id = ${transport.sessionId!}
            `,
            (rows) => rows.length > 0 ? rows : undefined
          ),
          { what: "the call's row" }
        )
        assert.deepStrictEqual(rows.map((row) => ({ ...row })), [{ state: "running", one_commit: true }])
        const result = yield* Fiber.join(hung)
        assert.include(textOf(result as any), "SVC_MCP_UPSTREAM_TIMEOUT")
      })))
  })

  describe("calls that wait for a person", () => {
    it.effect("with a task: the task names the approval; once approved through the REST API, tasks/result answers the tool's result", () =>
      Effect.scoped(Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpUpstream()
        const org = yield* organization(upstream.url)
        const { client } = yield* connect(svc.baseUrl, org.key)
        const created = yield* Effect.promise(() =>
          client.request({
            method: "tools/call",
            params: { name: "tools__deploy", arguments: { text: "v2" }, task: {} }
          }, CreateTaskResultSchema)
        )
        assert.strictEqual(created.task.status, "working")
        const approvalId = approvalOf(created.task.statusMessage ?? "")
        assert.isDefined(approvalId)
        assert.strictEqual(upstream.calls.length, 0)
        yield* decide(org, approvalId!, "approve")
        // Another client (another connection, as after a restart) reads the task from the database.
        const { client: other } = yield* connect(svc.baseUrl, org.key)
        const result = yield* Effect.promise(() =>
          other.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema)
        )
        assert.strictEqual(textOf(result as any), "done deploy {\"text\":\"v2\"}")
        const task = yield* Effect.promise(() => client.experimental.tasks.getTask(created.task.taskId))
        assert.strictEqual(task.status, "completed")
        assert.strictEqual(upstream.calls.length, 1)
      })))

    it.effect("with a task, a rejection ends the task failed with the reviewer's reason, nothing called", () =>
      Effect.scoped(Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpUpstream()
        const org = yield* organization(upstream.url)
        const { client } = yield* connect(svc.baseUrl, org.key)
        const created = yield* Effect.promise(() =>
          client.request(
            { method: "tools/call", params: { name: "tools__deploy", arguments: {}, task: {} } },
            CreateTaskResultSchema
          )
        )
        const approvalId = approvalOf(created.task.statusMessage ?? "")!
        yield* org.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "reject", reason: "not on a Friday" }
        })
        const result = yield* Effect.promise(() =>
          client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema)
        )
        assert.isTrue(result.isError)
        assert.include(textOf(result as any), "not on a Friday")
        const task = yield* Effect.promise(() => client.experimental.tasks.getTask(created.task.taskId))
        assert.strictEqual(task.status, "failed")
        assert.strictEqual(upstream.calls.length, 0)
      })))

    it.effect("without a task: the call waits SVC_MCP_APPROVAL_WAIT, says how to resume, and the same step_id resumes it once approved", () =>
      Effect.scoped(Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpUpstream()
        const org = yield* organization(upstream.url)
        const { client } = yield* connect(svc.baseUrl, org.key)
        const params = { name: "tools__deploy", arguments: { text: "v3" }, _meta: { "svc/step_id": "deploy-v3" } }
        const waited = yield* Effect.promise(() => client.callTool(params))
        assert.isTrue(waited.isError)
        assert.include(textOf(waited as any), "SVC_MCP_APPROVAL_WAIT")
        assert.include(textOf(waited as any), "deploy-v3")
        // The waiting call's row was written by its step's transaction, with the approval.
        const call = yield* svc.sql<{ state: string; one_commit: boolean }>`
          SELECT c.state, c.xmin::text = a.xmin::text AS one_commit FROM mcp_calls c
          JOIN approvals a ON a.id = c.approval_id WHERE c.step_id = 'deploy-v3'
        `
        assert.deepStrictEqual(call.map((row) => ({ ...row })), [{ state: "pending", one_commit: true }])
        yield* decide(org, approvalOf(textOf(waited as any))!, "approve")
        const resumed = yield* Effect.promise(() => client.callTool(params))
        assert.strictEqual(textOf(resumed as any), "done deploy {\"text\":\"v3\"}")
        // Sent once more: the recorded result, the tool not run again.
        const again = yield* Effect.promise(() => client.callTool(params))
        assert.strictEqual(textOf(again as any), "done deploy {\"text\":\"v3\"}")
        assert.strictEqual(upstream.calls.length, 1)
      })))
  })

  describe("organizations and keys", () => {
    it.effect("another organization's key lists none of these tools, cannot call them nor read their tasks; a key without mcp.use is 403", () =>
      Effect.scoped(Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpUpstream()
        const org = yield* organization(upstream.url)
        const stranger = yield* SvcTest.org()
        const { client } = yield* connect(svc.baseUrl, org.key)
        const created = yield* Effect.promise(() =>
          client.request(
            { method: "tools/call", params: { name: "tools__deploy", arguments: {}, task: {} } },
            CreateTaskResultSchema
          )
        )
        const { client: theirs } = yield* connect(svc.baseUrl, stranger.key)
        const { tools } = yield* Effect.promise(() => theirs.listTools())
        assert.deepStrictEqual(tools, [])
        const call = yield* Effect.promise(() =>
          theirs.callTool({ name: "tools__echo", arguments: {} }).then(() => "answered", (e) => String(e))
        )
        assert.include(call, "Unknown tool")
        const read = yield* Effect.promise(() =>
          theirs.experimental.tasks.getTask(created.task.taskId).then(() => "answered", (e) => String(e))
        )
        assert.notStrictEqual(read, "answered")
        assert.strictEqual(upstream.calls.length, 0)

        const limited = yield* org.newKey(["agents.read"])
        const refused = yield* Effect.promise(() =>
          fetch(`${svc.baseUrl}/mcp`, {
            method: "POST",
            headers: {
              authorization: `Bearer ${limited.key}`,
              "content-type": "application/json",
              accept: "application/json, text/event-stream"
            },
            body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" })
          })
        )
        assert.strictEqual(refused.status, 403)
        assert.strictEqual((yield* Effect.promise(() => refused.json())).required_scope, "mcp.use")
      })))
  })
})
