/**
 * Every `tools/call` through the gateway is a governed step (docs/mcp.md,
 * "Governed calls"): it goes through `AgentSessions.governStep`, exactly as
 * a REST step does (policy, rules on arguments, approvals, events, mail,
 * streams, spans), then:
 *
 * - `allow`: the upstream tool runs and its result is the answer; the
 *   outcome is reported on the step (`tool:succeeded` / `tool:failed`);
 * - `reject`: a tool result with `isError` and the reason; nothing runs;
 * - `pending`: a durable call in `mcp_calls`, answered as an MCP task when
 *   the client asked for one, else waited for up to `SVC_MCP_APPROVAL_WAIT`.
 *   Whichever process is asked about it once a person approved claims it
 *   and runs the tool with the approved (possibly edited) arguments.
 *
 * The state of a call lives in the database only: any process answers
 * `tasks/get` and `tasks/result`, and a call sent again with its `step_id`
 * gets the recorded answer.
 */
import type { CallToolResult, Task } from "@modelcontextprotocol/sdk/types.js"
import { Context, Data, Duration, Effect, FiberSet, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { AgentSessions } from "../agents/Sessions.ts"
import type { ApprovalSnapshot } from "../api/Approvals.ts"
import { Approvals } from "../approvals/Approvals.ts"
import { SvcConfig } from "../platform/Config.ts"
import { type CallRow, findByStep, isFinished, makeCallRows, toTask } from "./CallRows.ts"
import { callWithStep } from "./CallWithStep.ts"
import { actionClassOf, McpServers, type ServerRow, splitExposedName } from "./Servers.ts"
import { Upstream } from "./Upstream.ts"

/** The tool is not one the gateway lists for this organization. */
export class UnknownTool extends Data.TaggedError("UnknownTool")<{ readonly name: string }> {}
/** The MCP session's agent session is gone. */
export class SessionGone extends Data.TaggedError("SessionGone")<{}> {}

/** A tool result that is an error, in words for the agent. */
export const toolError = (text: string, meta: Record<string, unknown> = {}): CallToolResult => ({
  content: [{ type: "text", text }],
  isError: true,
  ...(Object.keys(meta).length === 0 ? {} : { _meta: meta })
})

/** The outcome kept on the step: the result itself up to this many characters of JSON, else its size. */
const OUTCOME_RESULT_MAX = 16_384

export type CallAnswer =
  | { readonly _tag: "Result"; readonly result: CallToolResult }
  | { readonly _tag: "Task"; readonly task: Task }

/** An organization's server looked up by name (`undefined`: none of that name). */
export interface FoundServer {
  readonly name: string
  readonly server: ServerRow | undefined
}

export interface CallRequest {
  readonly orgId: string
  readonly sessionId: string
  readonly name: string
  readonly arguments: Record<string, unknown>
  readonly stepId: string
  /** The client asked for a task (`params.task`). */
  readonly task: boolean
  /** The server of `name`, when it was read already: used when its name is the one called. */
  readonly found?: FoundServer | undefined
  /** Told while a call without a task waits for a person. */
  readonly progress: (message: string, elapsedMs: number) => Effect.Effect<void>
  /**
   * Told when this request's call starts waiting for a person (once, when
   * its approval is opened), and, for a call without a task, when that
   * approval closes within the wait. Neither fails nor holds the call.
   */
  readonly approval?: {
    readonly waiting: (approval: ApprovalSnapshot) => Effect.Effect<void>
    readonly closed: (approvalId: string) => Effect.Effect<void>
  }
}

const pendingMessage = (snapshot: ApprovalSnapshot) =>
  `Waiting for approval ${snapshot.approval_id}: a person decides by ${snapshot.deadline_at}; ` +
  `if nobody does, it expires at ${snapshot.expires_at} and the call is ${
    snapshot.timeout_action === "allow" ? "run" : "refused"
  }.`

const rejectedText = (snapshot: ApprovalSnapshot) => {
  const who = snapshot.decided_by === undefined ? "" : ` by ${snapshot.decided_by}`
  const why = snapshot.decision_reason === undefined ? "" : `: ${snapshot.decision_reason}`
  const answer = snapshot.response === undefined
    ? ""
    : `\nThe reviewer's answer: ${
      typeof snapshot.response === "string" ? snapshot.response : JSON.stringify(snapshot.response)
    }`
  return `A person rejected this call${who}${why}.${answer}`
}

export class McpCalls extends Context.Service<McpCalls, {
  readonly call: (request: CallRequest) => Effect.Effect<CallAnswer, UnknownTool | SessionGone>
  /** The task as it stands now (a decided approval moves it on); `undefined` when it is not the organization's. */
  readonly task: (orgId: string, taskId: string) => Effect.Effect<Task | undefined>
  /** The result of a finished task, `undefined` until then. */
  readonly result: (orgId: string, taskId: string) => Effect.Effect<CallToolResult | undefined>
  readonly cancel: (orgId: string, taskId: string) => Effect.Effect<boolean>
  readonly list: (
    orgId: string,
    sessionId: string,
    cursor: string | undefined
  ) => Effect.Effect<{ readonly tasks: ReadonlyArray<Task>; readonly nextCursor?: string }>
}>()("svc/mcp/McpCalls") {
  static readonly layer = Layer.effect(
    McpCalls,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const sessions = yield* AgentSessions
      const approvals = yield* Approvals
      const servers = yield* McpServers
      const upstream = yield* Upstream
      const config = yield* SvcConfig
      // A run holds its call for the upstream's deadline and a margin to record it.
      const leaseMs = Duration.toMillis(config.mcp.upstreamTimeout) + 5_000
      const rows = makeCallRows(sql, leaseMs)
      // Runs started by a task read: they outlive the request that noticed the decision.
      const runs = yield* FiberSet.make<void>()

      const outcomeResult = (result: CallToolResult) => {
        const text = JSON.stringify(result)
        return text.length <= OUTCOME_RESULT_MAX ? JSON.parse(text) : { omitted: true, characters: text.length }
      }

      /**
       * Runs a claimed call's tool, records its result on the call and its outcome on the step.
       * `found`: the call's server was just read (an allowed call found it by name); else it is read here.
       */
      const execute = Effect.fn("McpCalls.execute")(
        function*(row: CallRow, args: Record<string, unknown>, digest: string | undefined, found?: ServerRow) {
          const server = found ?? Option.getOrUndefined(yield* Effect.option(servers.find(row.org_id, row.server_id)))
          // The URL and headers are read only when no session with the server is kept.
          const target = { serverId: row.server_id, connection: servers.connection(row.org_id, row.server_id) }
          const result = server === undefined
            ? toolError("The MCP server of this tool was removed from the organization; the call did not run.")
            : yield* upstream.callTool(row.org_id, target, row.tool, args).pipe(
              Effect.catchTag(
                "UpstreamError",
                (error) => Effect.succeed(toolError(`The upstream MCP server failed: ${error.message}`))
              )
            )
          const failed = result.isError === true
          // The call's end and the step's outcome in one statement: the outcome only when the call had not ended.
          const recorded = yield* sessions.reportOutcomeGated({
            orgId: row.org_id,
            sessionId: row.session_id,
            stepId: row.step_id,
            outcome: {
              status: failed ? "failed" : "succeeded",
              result: outcomeResult(result),
              ...(failed ? { error: "the tool answered with isError" } : {}),
              ...(digest === undefined ? {} : { arguments_digest: digest })
            },
            gate: rows.finishGate(
              row.id,
              failed ? "failed" : "completed",
              result,
              failed ? "The tool failed." : "The tool ran."
            )
          })
          if (recorded.gated && !recorded.recorded) {
            yield* Effect.logWarning(
              "mcp: the step's outcome was not recorded (already reported, or not an allowed step with these arguments)"
            )
          }
          return result
        }
      )

      /**
       * Moves a call waiting for a person on, from its approval: still
       * pending (with the approval's deadlines), refused, or claimed and run
       * (here, or in the background when `inline` is false).
       */
      const settle = Effect.fn("McpCalls.settle")(function*(row: CallRow, inline: boolean) {
        if (isFinished(row.state) || row.approval_id === null) return { row, message: undefined, waiting: undefined }
        const snapshot = yield* approvals.get(row.org_id, row.approval_id).pipe(Effect.option)
        if (snapshot._tag === "None") {
          const gone = yield* rows.finish(
            row.id,
            "failed",
            toolError("The approval of this call no longer exists."),
            "The approval is gone."
          )
          return { row: gone ?? row, message: undefined, waiting: undefined }
        }
        const approval = snapshot.value
        const runs_ = approval.status === "approved" ||
          (approval.status === "expired" && approval.timeout_action === "allow")
        if (approval.status === "pending") return { row, message: pendingMessage(approval), waiting: approval }
        if (!runs_) {
          const text = approval.status === "rejected"
            ? rejectedText(approval)
            : `The approval expired at ${approval.expires_at} without a decision; the call was refused.`
          const done = yield* rows.finish(
            row.id,
            "failed",
            toolError(text, { "svc/approval_id": approval.approval_id }),
            text
          )
          return { row: done ?? (yield* rows.find(row.org_id, row.id)) ?? row, message: undefined, waiting: undefined }
        }
        const claimed = yield* rows.claim(row.id)
        if (claimed === undefined) return { row, message: undefined, waiting: undefined }
        const args = (approval.approved_arguments ?? claimed.arguments) as Record<string, unknown>
        if (inline) {
          yield* execute(claimed, args, approval.arguments_digest)
          return { row: (yield* rows.find(row.org_id, row.id)) ?? claimed, message: undefined, waiting: undefined }
        }
        yield* FiberSet.run(runs, Effect.asVoid(execute(claimed, args, approval.arguments_digest)))
        return { row: claimed, message: undefined, waiting: undefined }
      })

      const task = Effect.fn("McpCalls.task")(function*(orgId: string, taskId: string) {
        const row = yield* rows.find(orgId, taskId)
        if (row === undefined) return undefined
        const settled = yield* settle(row, false)
        return toTask(settled.row, settled.message)
      })

      const result = Effect.fn("McpCalls.result")(function*(orgId: string, taskId: string) {
        const row = yield* rows.find(orgId, taskId)
        if (row === undefined || !isFinished(row.state)) return undefined
        return (row.result ?? toolError("The call was cancelled before it ran.")) as CallToolResult
      })

      const cancel = (orgId: string, taskId: string) =>
        Effect.map(rows.cancel(orgId, taskId), (row) => row !== undefined)

      const list = Effect.fn("McpCalls.list")(function*(orgId: string, sessionId: string, cursor: string | undefined) {
        const page = yield* rows.listPending(orgId, sessionId, cursor, 51)
        const tasks = page.slice(0, 50).map((row) => toTask(row))
        return page.length > 50 ? { tasks, nextCursor: page[49]!.id } : { tasks }
      })

      const resume = (stepId: string, taskId: string) =>
        `Call this tool again with the same arguments and "_meta": {"svc/step_id": "${stepId}"} to get its result ` +
        `(or read task ${taskId} with tasks/get and tasks/result).`

      /**
       * A call without a task: waits for the decision up to `SVC_MCP_APPROVAL_WAIT`, then says how to resume.
       * `opened`: the call was opened by this request (its wait is announced once).
       */
      const waitFor = Effect.fn("McpCalls.waitFor")(function*(first: CallRow, request: CallRequest, opened: boolean) {
        const waitMs = Duration.toMillis(config.mcp.approvalWait)
        const started = performance.now()
        let row = first
        let announced: string | undefined
        for (;;) {
          const settled = yield* settle(row, true)
          row = settled.row
          if (opened && announced === undefined && settled.waiting !== undefined && request.approval) {
            announced = settled.waiting.approval_id
            yield* request.approval.waiting(settled.waiting)
          }
          if (announced !== undefined && settled.waiting === undefined && request.approval) {
            yield* request.approval.closed(announced)
            announced = undefined
          }
          if (isFinished(row.state)) return (row.result ?? toolError("The call was cancelled.")) as CallToolResult
          const elapsed = performance.now() - started
          if (elapsed >= waitMs) {
            const waiting = settled.message ?? "The call is waiting to run."
            return toolError(
              `${waiting} No decision within ${waitMs} ms (SVC_MCP_APPROVAL_WAIT). ${resume(row.step_id, row.id)}`,
              {
                "svc/step_id": row.step_id,
                "svc/task_id": row.id,
                ...(row.approval_id === null ? {} : { "svc/approval_id": row.approval_id })
              }
            )
          }
          yield* request.progress(settled.message ?? "The tool is running.", elapsed)
          yield* Effect.sleep(Duration.millis(Math.min(1000, waitMs - elapsed)))
          row = (yield* rows.find(row.org_id, row.id)) ?? row
        }
      })

      const answerCall = Effect.fn("McpCalls.answerCall")(function*(request: CallRequest) {
        const parts = splitExposedName(request.name)
        const server = parts === undefined
          ? undefined
          : request.found?.name === parts.server
          ? request.found.server
          : yield* servers.findByName(request.orgId, parts.server)
        if (parts === undefined || server === undefined) return yield* new UnknownTool({ name: request.name })
        const actionClass = actionClassOf(server, parts.tool)
        yield* Effect.annotateCurrentSpan({ "svc.mcp_server_id": server.id, "svc.action_class": actionClass })
        // The call's row is written in the step's statement when the step is new.
        const opening = callWithStep(sql, leaseMs, { ...request, serverId: server.id, tool: parts.tool })
        const answer = yield* sessions.governStepWith(request.orgId, request.sessionId, {
          step_id: request.stepId,
          tool: request.name,
          action_class: actionClass,
          arguments: request.arguments as never
        }, opening.piece).pipe(
          Effect.map(({ answer, companion }) => ({ _tag: "Answer" as const, answer, companion })),
          Effect.catchTags({
            NotFound: () => Effect.fail(new SessionGone()),
            InvalidRequest: (error) =>
              Effect.succeed({ _tag: "Refused" as const, text: error.detail ?? "The step was refused." }),
            ValidationBusy: () =>
              Effect.succeed({
                _tag: "Refused" as const,
                text: "svc is busy evaluating this organization's rules; call again shortly."
              })
          })
        )
        if (answer._tag === "Refused") {
          return { _tag: "Result" as const, result: toolError(answer.text, { "svc/step_id": request.stepId }) }
        }
        const decision = answer.answer
        const meta = {
          "svc/step_id": request.stepId,
          "svc/decision": decision.decision,
          "svc/action_class": actionClass
        }
        if (decision.decision === "reject") {
          const why = decision.reason ?? `the organization's policy for action class ${actionClass} refuses it`
          return { _tag: "Result" as const, result: toolError(`svc refused this call: ${why}.`, meta) }
        }
        const approvalId = decision.approval_id ?? null
        const written = opening.row(answer.companion, decision.decision, approvalId)
        // A step sent again (or a call whose row is missing): its call's row, written now when there is none.
        const opened = written !== undefined
          ? { row: written, created: true }
          : yield* rows.open({ ...opening.call, approvalId }, decision.decision === "allow" ? "running" : "pending")
        if (decision.decision === "allow") {
          if (opened.created) {
            return { _tag: "Result" as const, result: yield* execute(opened.row, request.arguments, undefined, server) }
          }
          // The same step sent again: its recorded result, or the run still under way.
          if (!isFinished(opened.row.state)) {
            const claimed = yield* rows.claim(opened.row.id)
            if (claimed !== undefined) {
              return { _tag: "Result" as const, result: yield* execute(claimed, request.arguments, undefined, server) }
            }
            return {
              _tag: "Result" as const,
              result: toolError(`This call is still running. ${resume(request.stepId, opened.row.id)}`, meta)
            }
          }
          return { _tag: "Result" as const, result: opened.row.result as CallToolResult }
        }
        if (request.task) {
          const settled = yield* settle(opened.row, false)
          if (opened.created && settled.waiting !== undefined && request.approval) {
            yield* request.approval.waiting(settled.waiting)
          }
          return { _tag: "Task" as const, task: toTask(settled.row, settled.message) }
        }
        return { _tag: "Result" as const, result: yield* waitFor(opened.row, request, opened.created) }
      })

      /**
       * A call that asked for a task is answered with one, also when it was
       * decided at once (a task-augmented request is answered with a task;
       * the official SDK's client refuses anything else): an allowed call's
       * own, finished with the tool's result (or still running), and for a
       * call the policy or a rule refused, one recorded as failed with the
       * refusal. A call refused before any decision (its step not recorded)
       * is answered as it is.
       */
      const call = Effect.fn("McpCalls.call")(function*(request: CallRequest) {
        const answer = yield* answerCall(request)
        if (!request.task || answer._tag === "Task") return answer
        const found = yield* findByStep(sql, request.sessionId, request.stepId)
        if (found !== undefined) return { _tag: "Task" as const, task: toTask(found) }
        const parts = splitExposedName(request.name)
        const server = parts === undefined ? undefined : yield* servers.findByName(request.orgId, parts.server)
        if (answer.result._meta?.["svc/decision"] !== "reject" || parts === undefined || server === undefined) {
          return answer
        }
        const opened = yield* rows.open({
          orgId: request.orgId,
          sessionId: request.sessionId,
          stepId: request.stepId,
          serverId: server.id,
          tool: parts.tool,
          arguments: request.arguments,
          approvalId: null
        }, "pending")
        const refused = yield* rows.finish(opened.row.id, "failed", answer.result, "Refused: the tool did not run.")
        return { _tag: "Task" as const, task: toTask(refused ?? opened.row) }
      })

      return McpCalls.of({ call, task, result, cancel, list })
    })
  )
}
