/**
 * URL-mode elicitation: a client that declared `elicitation: { url: {} }`
 * is sent, when its call goes pending, one `elicitation/create` with
 * `mode: "url"` opening the approval's console page (under
 * `SVC_PUBLIC_URL`), on the call's own stream, whether the call asked for
 * a task or waits. Its answer decides nothing: the call runs once a person
 * approves through the API. A waiting call whose approval closes gets
 * `notifications/elicitation/complete` with the same id. A client that did
 * not declare it is sent none.
 */
import { assert, layer } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import {
  CallToolResultSchema,
  type ClientCapabilities,
  CreateTaskResultSchema,
  ElicitationCompleteNotificationSchema,
  ElicitRequestSchema
} from "@modelcontextprotocol/sdk/types.js"
import { Duration, Effect, Layer, Option } from "effect"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { mcpUpstream } from "../../support/mcpUpstream.ts"
import { loopbackTargets, TestTls } from "../../support/tls.ts"

const PUBLIC_URL = "https://svc.example.test"

const service = Layer.unwrap(Effect.gen(function*() {
  const tls = yield* TestTls.shared
  return SvcTest.layer({
    config: {
      ...loopbackTargets(tls),
      publicUrl: Option.some(PUBLIC_URL),
      mcp: {
        upstreamTimeout: Duration.seconds(5),
        upstreamMaxBytes: 64 * 1024,
        upstreamsPerOrg: 16,
        approvalWait: Duration.seconds(5),
        maxServersPerOrg: 50
      }
    }
  })
}))

const textOf = (result: { content?: ReadonlyArray<unknown> }) =>
  (result.content ?? []).map((item) => (item as { text?: string }).text ?? "").join("")

interface Seen {
  readonly method: string
  readonly params: Record<string, unknown>
}

/** `tools__deploy` needs a person; an organization key of `mcp.use` only. */
const organization = Effect.gen(function*() {
  const upstream = yield* mcpUpstream()
  const org = yield* SvcTest.org()
  yield* org.client.mcpServers.create({
    payload: { name: "tools", url: upstream.url, tool_action_classes: { deploy: "mcp.review" } }
  })
  yield* org.client.approvalPolicies.put({
    params: { action_class: "mcp.review" },
    payload: { mode: "require_approval", review_seconds: 600, expiring_notice_seconds: 0, timeout_action: "reject" }
  })
  const key = yield* org.newKey(["mcp.use"])
  return { org, upstream, key: key.key }
})

/**
 * A client declaring `capabilities`; every server request and elicitation
 * notification it receives is recorded, and `onElicit` runs on each
 * elicitation; the answer, `accept`, goes once what it returns settles.
 */
const connect = (
  key: string,
  capabilities: ClientCapabilities,
  onElicit: (seen: Seen) => Promise<unknown> | void = () => {}
) =>
  Effect.gen(function*() {
    const svc = yield* SvcTest
    const seen: Array<Seen> = []
    const client = yield* Effect.acquireRelease(
      Effect.promise(async () => {
        const client = new Client({ name: "elicitation-test", version: "1.0.0" }, { capabilities })
        if (capabilities.elicitation !== undefined) {
          client.setRequestHandler(ElicitRequestSchema, async (request) => {
            const entry = { method: request.method, params: request.params as Record<string, unknown> }
            seen.push(entry)
            await onElicit(entry)
            return { action: "accept" }
          })
          client.setNotificationHandler(ElicitationCompleteNotificationSchema, async (notification) => {
            seen.push({ method: notification.method, params: notification.params })
          })
        }
        // Any other request svc might send is recorded too.
        client.fallbackRequestHandler = async (request) => {
          seen.push({ method: request.method, params: (request.params ?? {}) as Record<string, unknown> })
          return {}
        }
        await client.connect(
          new StreamableHTTPClientTransport(new URL(`${svc.baseUrl}/mcp`), {
            requestInit: { headers: { authorization: `Bearer ${key}` } }
          })
        )
        return client
      }),
      (client) => Effect.promise(() => client.close())
    )
    return { client, seen }
  })

const pendingApprovals = (org: TestOrg) =>
  Effect.map(
    org.client.approvals.list({ query: { status: "pending" } }),
    (page) => page.approvals.map((approval) => approval.approval_id)
  )

const approve = (org: TestOrg, approvalId: string) =>
  org.client.approvals.decide({ params: { approval_id: approvalId }, payload: { decision: "approve" } })

/** Waits (a bounded while) for `seen` to hold `count` messages. */
const until = (seen: ReadonlyArray<Seen>, count: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 100 && seen.length < count; i++) yield* Effect.sleep(Duration.millis(20))
  })

layer(service, { excludeTestServices: true })("URL-mode elicitation of a call that waits for a person", (it) => {
  it.effect("with a task: one elicitation/create in url mode opening the approval's console page; the call runs once approved through the API", () =>
    Effect.scoped(Effect.gen(function*() {
      const { org, upstream, key } = yield* organization
      const { client, seen } = yield* connect(key, { elicitation: { url: {} } })
      const call = () =>
        Effect.promise(() =>
          client.request({
            method: "tools/call",
            params: {
              name: "tools__deploy",
              arguments: { text: "token-9f2c" },
              task: {},
              _meta: { "svc/step_id": "deploy-1" }
            }
          }, CreateTaskResultSchema)
        )
      const created = yield* call()
      assert.strictEqual(created.task.status, "working")
      yield* until(seen, 1)
      const [approvalId] = yield* pendingApprovals(org)
      assert.isDefined(approvalId)
      assert.strictEqual(seen.length, 1)
      assert.strictEqual(seen[0]!.method, "elicitation/create")
      const params = seen[0]!.params
      assert.strictEqual(params["mode"], "url")
      assert.strictEqual(params["elicitationId"], approvalId)
      assert.strictEqual(params["url"], `${PUBLIC_URL}/console/approvals?approval=${approvalId}`)
      const message = String(params["message"])
      assert.include(message, "tools__deploy")
      assert.include(message, approvalId!)
      const approval = yield* org.client.approvals.get({ params: { approval_id: approvalId! } })
      assert.include(message, approval.deadline_at)
      // Never the arguments.
      assert.notInclude(JSON.stringify(params), "token-9f2c")

      // The client's `accept` decided nothing: the approval waits for a person.
      assert.deepStrictEqual(yield* pendingApprovals(org), [approvalId])
      // The same call sent again answers its task and sends no second elicitation.
      assert.strictEqual((yield* call()).task.taskId, created.task.taskId)
      assert.strictEqual(upstream.calls.length, 0)
      yield* approve(org, approvalId!)
      const result = yield* Effect.promise(() =>
        client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema)
      )
      assert.strictEqual(textOf(result as any), "done deploy {\"text\":\"token-9f2c\"}")
      // Reading the task sends nothing more.
      yield* Effect.sleep(Duration.millis(200))
      assert.strictEqual(seen.length, 1)
    })))

  it.effect("without a task: the waiting call's stream carries the elicitation, then elicitation/complete with its id once approved, then the result; a client that never answers holds nothing", () =>
    Effect.scoped(Effect.gen(function*() {
      const { org, upstream, key } = yield* organization
      const runPromise = Effect.runPromiseWith(yield* Effect.context<never>())
      // The person approves as soon as the elicitation arrives, while the call still waits; the client never answers.
      const approving = (seen: Seen) => {
        void runPromise(approve(org, String(seen.params["elicitationId"])))
        return new Promise<never>(() => {})
      }
      const { client, seen } = yield* connect(key, { elicitation: { url: {} } }, approving)
      const result = yield* Effect.promise(() => client.callTool({ name: "tools__deploy", arguments: { text: "v4" } }))
      assert.strictEqual(textOf(result as any), "done deploy {\"text\":\"v4\"}")
      const [{ approval_id }] = (yield* org.client.approvals.list({ query: { status: "approved" } })).approvals
      yield* until(seen, 2)
      assert.deepStrictEqual(seen.map((message) => message.method), [
        "elicitation/create",
        "notifications/elicitation/complete"
      ])
      assert.strictEqual(seen[0]!.params["elicitationId"], approval_id)
      assert.strictEqual(seen[0]!.params["url"], `${PUBLIC_URL}/console/approvals?approval=${approval_id}`)
      assert.deepStrictEqual(seen[1]!.params, { elicitationId: approval_id })
      assert.strictEqual(upstream.calls.length, 1)
    })))

  it.effect("a client that did not declare url elicitation (form only, or none) is sent nothing; its call still runs once approved", () =>
    Effect.scoped(Effect.gen(function*() {
      const { org, upstream, key } = yield* organization
      for (const capabilities of [{ elicitation: { form: {} } }, {}] satisfies Array<ClientCapabilities>) {
        const { client, seen } = yield* connect(key, capabilities)
        const created = yield* Effect.promise(() =>
          client.request({
            method: "tools/call",
            params: { name: "tools__deploy", arguments: { text: "v5" }, task: {} }
          }, CreateTaskResultSchema)
        )
        assert.strictEqual(created.task.status, "working")
        const [approvalId] = yield* pendingApprovals(org)
        yield* approve(org, approvalId!)
        const result = yield* Effect.promise(() =>
          client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema)
        )
        assert.strictEqual(textOf(result as any), "done deploy {\"text\":\"v5\"}")
        assert.deepStrictEqual(seen, [])
      }
      assert.strictEqual(upstream.calls.length, 2)
    })))
})
