/**
 * A call that asks for a task gets one, also when it is decided at once:
 * the official SDK's client refuses any other answer to a task-augmented
 * request, and its `callToolStream` runs the whole loop. An allowed call's
 * task is completed with the tool's result; a refused call's is failed with
 * the refusal, and nothing runs; the same step sent again answers the same
 * task.
 */
import { assert, layer } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { CallToolResultSchema, CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js"
import { Duration, Effect, Layer } from "effect"
import { SvcTest } from "../../../src/testing.ts"
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
        upstreamsPerOrg: 16,
        approvalWait: Duration.seconds(1),
        maxServersPerOrg: 50
      }
    }
  })
}))

const textOf = (result: { content?: ReadonlyArray<unknown> }) =>
  (result.content ?? []).map((item) => (item as { text?: string }).text ?? "").join("")

/** `tools` registered with its default class allowed and `delete_all` refused; a client connected with a key of `mcp.use`. */
const connected = Effect.gen(function*() {
  const svc = yield* SvcTest
  const upstream = yield* mcpUpstream()
  const org = yield* SvcTest.org()
  yield* org.client.mcpServers.create({
    payload: { name: "tools", url: upstream.url, tool_action_classes: { delete_all: "mcp.danger" } }
  })
  for (const [action_class, mode] of [["mcp.tools", "allow"], ["mcp.danger", "reject"]] as const) {
    yield* org.client.approvalPolicies.put({
      params: { action_class },
      payload: { mode, review_seconds: 600, expiring_notice_seconds: 0, timeout_action: "reject" }
    })
  }
  const key = yield* org.newKey(["mcp.use"])
  const client = yield* Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new Client({ name: "decided-tasks", version: "1.0.0" })
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${svc.baseUrl}/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${key.key}` } }
        })
      )
      return client
    }),
    (client) => Effect.promise(() => client.close())
  )
  return { client, upstream }
})

/** Every message of the SDK's `callToolStream` for `name` (after `tools/list`, so it asks for a task). */
const streamed = (client: Client, name: string, args: Record<string, unknown>) =>
  Effect.promise(async () => {
    await client.listTools()
    const messages: Array<{ type: string; status?: string; text?: string; isError?: boolean }> = []
    for await (const message of client.experimental.tasks.callToolStream({ name, arguments: args })) {
      if (message.type === "taskCreated" || message.type === "taskStatus") {
        messages.push({ type: message.type, status: message.task.status })
      } else if (message.type === "result") {
        messages.push({ type: "result", text: textOf(message.result as any), isError: message.result.isError === true })
      } else {
        messages.push({ type: message.type, text: String(message.error) })
      }
    }
    return messages
  })

layer(service, { excludeTestServices: true })("tools/call with a task, decided at once", (it) => {
  it.effect("allowed: the SDK's callToolStream gets a task completed with the tool's result", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, upstream } = yield* connected
      const messages = yield* streamed(client, "tools__echo", { text: "hi" })
      assert.deepStrictEqual(messages, [
        { type: "taskCreated", status: "completed" },
        { type: "taskStatus", status: "completed" },
        { type: "result", text: "echo: hi", isError: false }
      ])
      assert.strictEqual(upstream.calls.length, 1)
    })))

  it.effect("refused by policy: a task failed with the refusal as its result; nothing runs", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, upstream } = yield* connected
      const call = () =>
        Effect.promise(() =>
          client.request({
            method: "tools/call",
            params: { name: "tools__delete_all", arguments: {}, task: {}, _meta: { "svc/step_id": "purge-1" } }
          }, CreateTaskResultSchema)
        )
      const { task } = yield* call()
      assert.strictEqual(task.status, "failed")
      const result = yield* Effect.promise(() =>
        client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)
      )
      assert.isTrue(result.isError)
      assert.include(textOf(result as any), "svc refused this call")
      assert.include(textOf(result as any), "mcp.danger")
      // The same step again: the same task.
      assert.strictEqual((yield* call()).task.taskId, task.taskId)
      assert.strictEqual(upstream.calls.length, 0)
    })))
})
