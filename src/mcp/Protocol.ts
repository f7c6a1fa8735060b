/**
 * The MCP server svc is to a client, built with the official SDK's `Server`
 * for one HTTP request (the gateway keeps nothing in memory between
 * requests: sessions, calls and tasks are in the database). It declares
 * tools (the organization's upstream tools, `tools/list`), governed calls
 * (`tools/call`, `Calls.ts`) and tasks for `tools/call` (`tasks/get`,
 * `tasks/result`, `tasks/list`, `tasks/cancel`, through a task store that
 * reads `mcp_calls`). A call that goes pending sends the approver to the
 * approval's console page when the client declared URL-mode elicitation
 * (`Elicitation.ts`).
 */
import type { TaskStore } from "@modelcontextprotocol/sdk/experimental/tasks"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type Tool
} from "@modelcontextprotocol/sdk/types.js"
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv"
import { Context, Duration, Effect, Layer, Schema } from "effect"
import { StepId } from "../api/Agents.ts"
import { VERSION } from "../api/Version.ts"
import { approvalPageUrl, serviceBaseUrl } from "../approvals/MailLinks.ts"
import { SvcConfig } from "../platform/Config.ts"
import { type FoundServer, McpCalls } from "./Calls.ts"
import { approvalElicitation, RequestServer } from "./Elicitation.ts"
import { actionClassOf, exposedName, McpServers } from "./Servers.ts"
import { Upstream } from "./Upstream.ts"

/** The `_meta` key a client sets on `tools/call` to choose the call's `step_id` (its idempotency key). */
export const STEP_ID_META = "svc/step_id"

/** Upstream servers listed at once by one `tools/list`. */
const LIST_CONCURRENCY = 4

const isStepId = Schema.is(StepId)

export interface Caller {
  readonly orgId: string
  /** The MCP session (its agent session); `undefined` for `initialize`. */
  readonly sessionId: string | undefined
  /** The server a `tools/call` names, read with the session's check (`SessionAndServer.ts`). */
  readonly found?: FoundServer | undefined
  /** The session's client declared URL-mode elicitation (read with the session's check). */
  readonly urlElicitation?: boolean | undefined
}

export class McpProtocol extends Context.Service<McpProtocol, {
  /** A server for one request of `caller`; its handlers run on this layer's services. */
  readonly server: (caller: Caller) => Effect.Effect<Server>
}>()("svc/mcp/McpProtocol") {
  static readonly layer = Layer.effect(
    McpProtocol,
    Effect.gen(function*() {
      const servers = yield* McpServers
      const upstream = yield* Upstream
      const calls = yield* McpCalls
      const config = yield* SvcConfig
      const baseUrl = yield* serviceBaseUrl
      // An elicitation's bookkeeping outlives the longest its call's stream stays open.
      const elicitationBoundMs = Duration.toMillis(config.mcp.approvalWait) +
        Duration.toMillis(config.mcp.upstreamTimeout) + 5_000
      // One for every request's server (the SDK makes a new Ajv with its formats per server
      // otherwise: 160-200 µs of CPU per request). svc asks no client for form input, so it validates nothing.
      const jsonSchemaValidator = new AjvJsonSchemaValidator()

      /** Every upstream server's tools under their gateway names; a server that fails is left out (and logged). */
      const listTools = Effect.fn("McpProtocol.listTools")(function*(orgId: string) {
        const rows = yield* servers.list(orgId)
        const lists = yield* Effect.forEach(rows, (row) =>
          Effect.gen(function*() {
            // The URL and headers are read only when no session with the server is kept.
            const target = { serverId: row.id, connection: servers.connection(orgId, row.id) }
            const tools = yield* upstream.listTools(orgId, target).pipe(
              Effect.catchTag("UpstreamError", (error) =>
                Effect.as(
                  Effect.logWarning("mcp: an upstream server's tools could not be listed", {
                    mcp_server_id: row.id,
                    error: error.message
                  }),
                  []
                ))
            )
            return tools.map((tool): Tool => {
              const actionClass = actionClassOf(row, tool.name)
              return {
                ...tool,
                name: exposedName(row, tool.name),
                description: `${
                  tool.description ?? tool.name
                }\n\n(Through svc: governed as action class ${actionClass}.)`,
                execution: { taskSupport: "optional" },
                _meta: { ...tool._meta, "svc/action_class": actionClass, "svc/server": row.name }
              }
            })
          }), { concurrency: LIST_CONCURRENCY })
        return lists.flat()
      })

      const server = Effect.fn("McpProtocol.server")(function*(caller: Caller) {
        const runPromise = Effect.runPromiseWith(yield* Effect.context<never>())
        // What the protocol's errors do not say (the database down, a defect) is logged and
        // answered in general words: its text (SQL, stack) never reaches the client.
        const run = <A, E>(effect: Effect.Effect<A, E>) =>
          runPromise(effect.pipe(
            Effect.catchDefect((defect) =>
              Effect.andThen(
                Effect.logError("mcp: a request failed", { defect: String(defect) }),
                Effect.fail(new McpError(ErrorCode.InternalError, "svc could not answer this request; try again."))
              )
            )
          ))
        const notUsed = () =>
          Promise.reject(new McpError(ErrorCode.InvalidRequest, "Tasks are created by tools/call only."))
        const taskStore: TaskStore = {
          createTask: notUsed,
          storeTaskResult: notUsed,
          getTask: async (taskId) => (await run(calls.task(caller.orgId, taskId))) ?? null,
          getTaskResult: async (taskId) => {
            const result = await run(calls.result(caller.orgId, taskId))
            if (result === undefined) throw new McpError(ErrorCode.InvalidParams, "The task has no result yet.")
            return result
          },
          updateTaskStatus: async (taskId, status) => {
            if (status !== "cancelled" || !(await run(calls.cancel(caller.orgId, taskId)))) {
              throw new McpError(ErrorCode.InvalidParams, "Only a task waiting for a person can be cancelled.")
            }
          },
          listTasks: async (cursor) => {
            if (caller.sessionId === undefined) return { tasks: [] }
            const page = await run(calls.list(caller.orgId, caller.sessionId, cursor))
            return page.nextCursor === undefined
              ? { tasks: [...page.tasks] }
              : { tasks: [...page.tasks], nextCursor: page.nextCursor }
          }
        }
        const mcp = new RequestServer({ name: "svc", version: VERSION }, {
          capabilities: {
            tools: { listChanged: false },
            tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } }
          },
          taskStore,
          jsonSchemaValidator,
          instructions:
            "svc governs every tool call: a call may be allowed, refused, or wait for a person's approval. " +
            "Call with a task to poll a waiting call; without one, a call waits a bounded time and then says how to resume."
        })

        mcp.setRequestHandler(
          ListToolsRequestSchema,
          async () => ({ tools: [...(await run(listTools(caller.orgId)))] })
        )

        mcp.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
          if (caller.sessionId === undefined) {
            throw new McpError(ErrorCode.InvalidRequest, "Initialize a session first.")
          }
          const chosen = request.params._meta?.[STEP_ID_META]
          if (chosen !== undefined && !isStepId(chosen)) {
            throw new McpError(
              ErrorCode.InvalidParams,
              `_meta.${STEP_ID_META} must be a string of 1 to 200 characters.`
            )
          }
          const progressToken = request.params._meta?.progressToken
          const answer = await run(
            calls.call({
              orgId: caller.orgId,
              sessionId: caller.sessionId,
              name: request.params.name,
              arguments: request.params.arguments ?? {},
              stepId: chosen ?? `rpc-${String(extra.requestId)}`,
              found: caller.found,
              task: request.params.task !== undefined,
              progress: (message, elapsedMs) =>
                progressToken === undefined ? Effect.void : Effect.promise(() =>
                  extra.sendNotification({
                    method: "notifications/progress",
                    params: { progressToken, progress: Math.floor(elapsedMs), message }
                  }).catch(() => undefined)
                ),
              approval: approvalElicitation({
                declared: caller.urlElicitation === true,
                pageUrl: (approvalId) => approvalPageUrl(baseUrl(), approvalId),
                tool: request.params.name,
                server: mcp,
                extra,
                boundMs: elicitationBoundMs
              })
            }).pipe(
              Effect.catchTags({
                UnknownTool: (error) =>
                  Effect.fail(new McpError(ErrorCode.InvalidParams, `Unknown tool: ${error.name}`)),
                SessionGone: () =>
                  Effect.fail(
                    new McpError(
                      ErrorCode.InvalidRequest,
                      "The session's agent session no longer exists; initialize again."
                    )
                  )
              })
            )
          )
          return answer._tag === "Task" ? { task: answer.task } : answer.result
        })
        return mcp
      })

      return McpProtocol.of({ server })
    })
  )
}
