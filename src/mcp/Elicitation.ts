/**
 * URL-mode elicitation (MCP 2025-11-25, docs/mcp.md "Sending the approver
 * to the console"): when a call starts waiting for a person and the
 * session's client declared `capabilities.elicitation.url` in
 * `initialize`, svc sends one `elicitation/create` with `mode: "url"` on
 * the call's own stream (a request related to the `tools/call`, so a
 * task-augmented call and a waiting call both carry it): the approval's
 * console page, and a message naming only the tool, the approval and its
 * deadline. Its `elicitationId` is the approval's id.
 *
 * It informs; it decides nothing. The client's answer (accept, decline,
 * cancel) comes back as a request of its own, which any process
 * acknowledges (202) and drops: a person decides in the console, signed in
 * with their own credentials, never an MCP key. svc does not wait for the
 * answer: the request is written before the call is answered, and its
 * bookkeeping ends after `boundMs` (set past the call's own wait, so the
 * SDK's cancellation at that bound finds the call's stream closed). A
 * failure is logged at debug and never fails or holds the call.
 *
 * When the approval closes while a call without a task still waits on its
 * stream, `notifications/elicitation/complete` with the same id goes on
 * that stream. A task-augmented call's stream ends with its answer (svc
 * opens no stream outside a request), so none is sent for it.
 *
 * The per-request `Server` never saw the session's `initialize`, so it does
 * not know the client's capabilities (which `Server.elicitInput` checks):
 * the request goes through the handler's related-request sender, the path
 * `elicitInput` takes, with the SDK's own types and result schema; and the
 * server (`RequestServer`) is told what the session declared before it
 * sends the completion, whose capability the SDK checks.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js"
import {
  type ElicitRequestURLParams,
  ElicitResultSchema,
  type ServerNotification,
  type ServerRequest
} from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import type { ApprovalSnapshot } from "../api/Approvals.ts"
import type { CallRequest } from "./Calls.ts"

/** The message shown with the link: the tool, the approval and its deadline; never the arguments. */
export const elicitationMessage = (tool: string, approval: Pick<ApprovalSnapshot, "approval_id" | "deadline_at">) =>
  `The call of ${tool} waits for approval ${approval.approval_id}: a person decides it in svc's console ` +
  `by ${approval.deadline_at}. This page shows it there; your answer here does not decide it.`

/**
 * The server of one request: the SDK's, told (`urlElicitation`) when the
 * session's client declared URL-mode elicitation, which the SDK otherwise
 * learns from `initialize` only.
 */
export class RequestServer extends Server {
  urlElicitation = false
  protected override assertNotificationCapability(method: Parameters<Server["notification"]>[0]["method"]) {
    if (method === "notifications/elicitation/complete" && this.urlElicitation) return
    super.assertNotificationCapability(method)
  }
}

export const approvalElicitation = (options: {
  /** Whether the session's client declared URL-mode elicitation (read with the session's check). */
  readonly declared: boolean
  readonly pageUrl: (approvalId: string) => string
  readonly tool: string
  readonly server: RequestServer
  readonly extra: RequestHandlerExtra<ServerRequest, ServerNotification>
  readonly boundMs: number
}): NonNullable<CallRequest["approval"]> => {
  let sent: string | undefined
  const debug = (message: string, approvalId: string) => (cause: unknown) =>
    Effect.logDebug(message, { approval_id: approvalId, error: String(cause) })

  const waiting = (approval: ApprovalSnapshot) =>
    Effect.gen(function*() {
      if (!options.declared) return
      options.server.urlElicitation = true
      const params: ElicitRequestURLParams = {
        mode: "url",
        elicitationId: approval.approval_id,
        url: options.pageUrl(approval.approval_id),
        message: elicitationMessage(options.tool, approval)
      }
      // Written to the call's stream now, before the call is answered; the answer is only logged.
      const answered = yield* Effect.sync(() =>
        options.extra.sendRequest({ method: "elicitation/create", params }, ElicitResultSchema, {
          timeout: options.boundMs
        }).then(
          (result) => ({ action: result.action, error: undefined }),
          (error: unknown) => ({ action: undefined, error: String(error) })
        )
      )
      sent = approval.approval_id
      yield* Effect.promise(() => answered).pipe(
        Effect.flatMap((answer) =>
          Effect.logDebug("mcp: the approval's elicitation", {
            approval_id: approval.approval_id,
            ...(answer.action === undefined ? { error: answer.error } : { action: answer.action })
          })
        ),
        Effect.forkDetach
      )
    }).pipe(Effect.catchCause(debug("mcp: the approval's elicitation was not sent", approval.approval_id)))

  const closed = (approvalId: string) =>
    sent !== approvalId ? Effect.void : Effect.tryPromise(() =>
      options.extra.sendNotification({
        method: "notifications/elicitation/complete",
        params: { elicitationId: approvalId }
      })
    ).pipe(Effect.catchCause(debug("mcp: the approval's elicitation/complete was not sent", approvalId)))

  return { waiting, closed }
}
