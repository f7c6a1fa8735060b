/**
 * The MCP example agent (`examples/mcp-agent.ts`, the official SDK's client
 * only) as a real child process against a live svc, whose gateway reaches an
 * upstream server built with the SDK on HTTPS loopback, through each way a
 * call ends: allowed (a task completed at once, with the tool's result),
 * refused by policy (a task failed at once; nothing runs), waiting for a
 * person and approved (the task completes with the tool's result) and
 * waiting until the approval expires (the task fails with the expiry). It prints one line per thing that happens; the test reads
 * the upstream's calls and the session's steps back.
 *
 * Also: the command of docs/mcp.md's "An example agent" runs as written
 * (in a newcomer's shell) and prints what the page shows.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { Duration, Effect, Layer } from "effect"
import { createServer } from "node:https"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { agentFinished as finished, startAgent as start } from "../../support/agent-process.ts"
import { blocksRun } from "../../support/run-blocks.ts"
import { loopbackTargets, TestTls } from "../../support/tls.ts"

const service = Layer.unwrap(Effect.gen(function*() {
  const tls = yield* TestTls.shared
  return SvcTest.layer({
    config: {
      ...loopbackTargets(tls),
      mcp: {
        upstreamTimeout: Duration.seconds(10),
        upstreamMaxBytes: 64 * 1024,
        upstreamsPerOrg: 16,
        approvalWait: Duration.seconds(1),
        maxServersPerOrg: 50
      }
    }
  })
}))

/**
 * An upstream MCP server (the SDK's, stateless, on HTTPS loopback with the
 * test CA's certificate) listing `tools`: `echo` answers `echo: <text>`, any
 * other `done <name> <arguments>`. Its calls are recorded.
 */
const mcpServer = (tools: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const tls = yield* TestTls.shared
    const calls: Array<{ readonly tool: string; readonly arguments: Record<string, unknown> }> = []
    const listed = tools.map((name) => ({
      name,
      description: `The ${name} tool`,
      inputSchema: { type: "object" as const, properties: { text: { type: "string" } } }
    }))
    const http = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
      const mcp = new Server({ name: "upstream", version: "1.0.0" }, { capabilities: { tools: {} } })
      mcp.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: listed }))
      mcp.setRequestHandler(CallToolRequestSchema, async (request) => {
        const args = (request.params.arguments ?? {}) as Record<string, unknown>
        calls.push({ tool: request.params.name, arguments: args })
        const text = request.params.name === "echo"
          ? `echo: ${String(args["text"])}`
          : `done ${request.params.name} ${JSON.stringify(args)}`
        return { content: [{ type: "text", text }] }
      })
      const transport = new StreamableHTTPServerTransport()
      res.on("close", () => {
        void transport.close()
        void mcp.close()
      })
      void mcp.connect(transport).then(() => transport.handleRequest(req, res))
    })
    yield* Effect.acquireRelease(
      Effect.promise(() => new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve))),
      () =>
        Effect.promise(() =>
          new Promise<void>((resolve) => {
            http.closeAllConnections()
            http.close(() => resolve())
          })
        )
    )
    return { url: `https://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`, calls }
  })

const TOOLS = ["echo", "delete_all", "deploy", "restart"]

/** Ids and instants as the docs write them. */
const normalize = (line: string) =>
  line
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|0193…/g, "…")
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z/g, "<instant>")

const WAITING = /^task \S+: working: Waiting for approval (\S+):/

/** An organization with the upstream registered as `ops`, a policy per action class, and a key of the agent's. */
const organization = (url: string) =>
  Effect.gen(function*() {
    const org = yield* SvcTest.org()
    yield* org.client.mcpServers.create({
      payload: {
        name: "ops",
        url,
        tool_action_classes: { deploy: "ops.deploy", delete_all: "ops.danger", restart: "ops.expiring" }
      }
    })
    const policy = (action_class: string, mode: "allow" | "reject" | "require_approval", review_seconds = 600) =>
      org.client.approvalPolicies.put({
        params: { action_class },
        payload: { mode, review_seconds, expiring_notice_seconds: 0, timeout_action: "reject" }
      })
    yield* policy("mcp.ops", "allow")
    yield* policy("ops.danger", "reject")
    yield* policy("ops.deploy", "require_approval")
    yield* policy("ops.expiring", "require_approval", 2)
    const agentKey = yield* org.newKey(["mcp.use"])
    return { org, key: agentKey.key }
  })

const runAgent = (baseUrl: string, key: string, tool: string, args: unknown) =>
  start(process.execPath, ["examples/mcp-agent.ts", tool, JSON.stringify(args)], {
    SVC_URL: baseUrl,
    SVC_API_KEY: key
  })

/** The session's one step as svc recorded it. */
const stepOf = (org: TestOrg, sessionId: string) =>
  Effect.map(
    org.client.agentSessions.get({ params: { session_id: sessionId }, query: {} }),
    (session) => {
      assert.lengthOf(session.steps, 1)
      return session.steps[0]!
    }
  )

const listed = [
  "tool ops__echo: mcp.ops",
  "tool ops__delete_all: ops.danger",
  "tool ops__deploy: ops.deploy",
  "tool ops__restart: ops.expiring"
]

layer(service, { excludeTestServices: true })("examples/mcp-agent.ts, run against a live svc", (it) => {
  it.effect(
    "allowed: a task completed at once, with the result of the tool, which ran once",
    () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpServer(TOOLS)
        const { org, key } = yield* organization(upstream.url)
        const agent = yield* runAgent(svc.baseUrl, key, "ops__echo", { text: "hello" })
        const { code, lines } = yield* finished(agent)
        assert.strictEqual(code, 0, agent.output())
        assert.deepStrictEqual(lines.map(normalize), [
          "session …",
          ...listed,
          "call ops__echo {\"text\":\"hello\"}",
          "task …: completed",
          "result: echo: hello"
        ])
        assert.deepStrictEqual(upstream.calls.map((call) => [call.tool, call.arguments]), [["echo", { text: "hello" }]])
        const step = yield* stepOf(org, lines[0]!.slice("session ".length))
        assert.deepStrictEqual([step.tool, step.decision, step.outcome?.status], ["ops__echo", "allow", "succeeded"])
      }).pipe(Effect.scoped),
    60_000
  )

  it.effect(
    "refused by policy: a task failed at once, with a tool error naming the class; nothing runs",
    () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpServer(TOOLS)
        const { key } = yield* organization(upstream.url)
        const agent = yield* runAgent(svc.baseUrl, key, "ops__delete_all", {})
        const { code, lines } = yield* finished(agent)
        assert.strictEqual(code, 0, agent.output())
        assert.deepStrictEqual(lines.map(normalize), [
          "session …",
          ...listed,
          "call ops__delete_all {}",
          "task …: failed",
          "tool error: svc refused this call: the organization's policy for action class ops.danger refuses it."
        ])
        assert.deepStrictEqual(upstream.calls, [])
      }).pipe(Effect.scoped),
    60_000
  )

  it.effect(
    "waiting for a person, then approved through the API: the task completes with the tool's result",
    () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpServer(TOOLS)
        const { org, key } = yield* organization(upstream.url)
        const agent = yield* runAgent(svc.baseUrl, key, "ops__deploy", { text: "v9" })
        const [, approvalId] = yield* Effect.promise(() => agent.line(WAITING))
        // Nothing runs while the call waits.
        assert.deepStrictEqual(upstream.calls, [])
        yield* org.client.approvals.decide({ params: { approval_id: approvalId! }, payload: { decision: "approve" } })
        const { code, lines } = yield* finished(agent)
        assert.strictEqual(code, 0, agent.output())
        assert.deepStrictEqual(lines.map(normalize), [
          "session …",
          ...listed,
          "call ops__deploy {\"text\":\"v9\"}",
          "task …: working: Waiting for approval …: a person decides by <instant>; if nobody does, it expires at <instant> and the call is refused.",
          "task …: completed",
          "result: done deploy {\"text\":\"v9\"}"
        ])
        assert.deepStrictEqual(upstream.calls.map((call) => call.tool), ["deploy"])
        const step = yield* stepOf(org, lines[0]!.slice("session ".length))
        assert.deepStrictEqual([step.approval_id, step.outcome?.status], [approvalId, "succeeded"])
      }).pipe(Effect.scoped),
    60_000
  )

  it.effect(
    "waiting for a person until the approval expires: the task fails with the expiry; nothing runs",
    () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpServer(TOOLS)
        const { org, key } = yield* organization(upstream.url)
        const agent = yield* runAgent(svc.baseUrl, key, "ops__restart", {})
        const { code, lines } = yield* finished(agent)
        assert.strictEqual(code, 0, agent.output())
        assert.deepStrictEqual(lines.map(normalize), [
          "session …",
          ...listed,
          "call ops__restart {}",
          "task …: working: Waiting for approval …: a person decides by <instant>; if nobody does, it expires at <instant> and the call is refused.",
          "task …: failed",
          "tool error: The approval expired at <instant> without a decision; the call was refused."
        ])
        assert.deepStrictEqual(upstream.calls, [])
        const step = yield* stepOf(org, lines[0]!.slice("session ".length))
        const approval = yield* org.client.approvals.get({ params: { approval_id: step.approval_id! } })
        assert.strictEqual(approval.status, "expired")
        assert.isUndefined(step.outcome)
      }).pipe(Effect.scoped),
    60_000
  )

  describe("docs/mcp.md runs as written", () => {
    const page = "docs/mcp.md"
    const blocks = blocksRun(page, "An example agent")

    it.effect("the command prints what the page shows while a person approves", () =>
      Effect.gen(function*() {
        assert.lengthOf(blocks, 1)
        const lines = blocks[0]!.code.split("\n")
        const commands = lines.filter((line) => !line.startsWith("#"))
        const shown = lines.filter((line) => line.startsWith("# ")).map((line) => normalize(line.slice(2)))
        assert.lengthOf(commands, 1)
        const svc = yield* SvcTest
        // The page's server: `ops` with the tools echo and deploy, deploy mapped to a class that asks a person.
        const upstream = yield* mcpServer(["echo", "deploy"])
        const org = yield* SvcTest.org()
        yield* org.client.mcpServers.create({
          payload: { name: "ops", url: upstream.url, tool_action_classes: { deploy: "ops.deploy" } }
        })
        yield* org.client.approvalPolicies.put({
          params: { action_class: "ops.deploy" },
          payload: {
            mode: "require_approval",
            review_seconds: 600,
            expiring_notice_seconds: 0,
            timeout_action: "reject"
          }
        })
        const agentKey = yield* org.newKey(["mcp.use"])
        // As in a newcomer's terminal: the shell's own Node and npm, no node_modules/.bin on PATH, no npm
        // variables; this run's svc for 127.0.0.1:8080.
        const shell: Record<string, string> = {}
        for (const [name, value] of Object.entries(process.env)) {
          if (value !== undefined && !name.toLowerCase().startsWith("npm_") && name !== "NODE") shell[name] = value
        }
        shell.PATH = (process.env.PATH ?? "").split(path.delimiter).filter((dir) => !dir.includes("node_modules"))
          .join(path.delimiter)
        const agent = yield* start("env", [
          "-i",
          ...Object.entries({ ...shell, KEY: agentKey.key }).map(([name, value]) => `${name}=${value}`),
          "bash",
          "-c",
          commands[0]!.replaceAll("http://127.0.0.1:8080", svc.baseUrl)
        ], {})
        const [, approvalId] = yield* Effect.promise(() => agent.line(WAITING))
        yield* org.client.approvals.decide({ params: { approval_id: approvalId! }, payload: { decision: "approve" } })
        const { code, lines: printed } = yield* finished(agent)
        assert.strictEqual(code, 0, agent.output())
        assert.deepStrictEqual(printed.map(normalize), shown)
        assert.deepStrictEqual(upstream.calls.map((call) => [call.tool, call.arguments]), [["deploy", { text: "v9" }]])
      }).pipe(Effect.scoped), 90_000)
  })
})
