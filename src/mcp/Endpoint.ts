/**
 * `/mcp`: svc's MCP endpoint over the Streamable HTTP transport (protocol
 * revision 2025-11-25 and the earlier ones the SDK negotiates), for an API
 * key holding `mcp.use` (`Authorization: Bearer`). The official SDK's
 * web-standard transport answers each request in stateless mode, with a
 * server built for it (`Protocol.ts`); the session is svc's own and lives
 * in the database (`Sessions.ts`): `initialize` opens it and answers its id
 * in `Mcp-Session-Id`, every later request must name it (400 without, 404
 * when unknown or ended: the client then initializes again), `DELETE`
 * ends it. `GET` is 405: svc sends nothing outside a request's answer.
 */
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import { Effect, Layer, Option } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { problemType } from "../api/Errors.ts"
import type { Principal } from "../api/Security.ts"
import { Identity } from "../identity/Identity.ts"
import { SvcConfig } from "../platform/Config.ts"
import { type Caller, McpProtocol } from "./Protocol.ts"
import { splitExposedName } from "./Servers.ts"
import { type ClientInfo, McpSessions } from "./Sessions.ts"

export const MCP_PATH = "/mcp"
const SESSION_HEADER = "mcp-session-id"

const problem = (
  status: 401 | 403 | 413,
  code: string,
  title: string,
  detail: string,
  headers: Record<string, string> = {}
) =>
  HttpServerResponse.jsonUnsafe(
    { type: problemType(code), status, title, code, detail },
    { status, contentType: "application/problem+json", headers }
  )

/**
 * An error answered over HTTP: a problem (as every error of svc, which the
 * router-wide middleware otherwise rewrites) that is also a JSON-RPC error
 * without a request id, as the transport's own refusals are.
 */
const rpcError = (status: 400 | 404 | 405, code: number, message: string, headers: Record<string, string> = {}) =>
  HttpServerResponse.jsonUnsafe(
    {
      type: problemType(status === 400 ? "INVALID_REQUEST" : status === 404 ? "NOT_FOUND" : "METHOD_NOT_ALLOWED"),
      status,
      title: message,
      code: status === 400 ? "INVALID_REQUEST" : status === 404 ? "NOT_FOUND" : "METHOD_NOT_ALLOWED",
      jsonrpc: "2.0",
      error: { code, message },
      id: null
    },
    { status, contentType: "application/problem+json", headers }
  )

const challenge = (error: string) => ({ "www-authenticate": `Bearer realm="svc", error="${error}"` })

/** The messages of a body: one, or a batch. */
const messagesOf = (body: unknown): ReadonlyArray<unknown> => Array.isArray(body) ? body : [body]

/** What an `initialize` says of its client: its protocol revision, name and whether it opens URLs for svc. */
const initializeOf = (
  body: unknown
): ClientInfo | undefined => {
  for (const message of messagesOf(body)) {
    if (typeof message === "object" && message !== null && (message as { method?: unknown }).method === "initialize") {
      const params = (message as {
        params?: {
          protocolVersion?: unknown
          clientInfo?: { name?: unknown }
          capabilities?: { elicitation?: { url?: unknown } }
        }
      }).params
      const url = params?.capabilities?.elicitation?.url
      return {
        protocolVersion: typeof params?.protocolVersion === "string" ? params.protocolVersion : "unknown",
        clientName: typeof params?.clientInfo?.name === "string" ? params.clientInfo.name : undefined,
        urlElicitation: typeof url === "object" && url !== null
      }
    }
  }
  return undefined
}

/** The server's name in the tool a body's one `tools/call` names (for `McpSessions.check`), else `undefined`. */
const calledServerOf = (body: unknown): string | undefined => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined
  const message = body as { method?: unknown; params?: { name?: unknown } }
  if (message.method !== "tools/call" || typeof message.params?.name !== "string") return undefined
  return splitExposedName(message.params.name)?.server
}

export const McpRoute = Layer.effectDiscard(Effect.gen(function*() {
  const router = yield* HttpRouter.HttpRouter
  const identity = yield* Identity
  const sessions = yield* McpSessions
  const protocol = yield* McpProtocol
  const config = yield* SvcConfig

  /** The caller, or the answer refusing them. */
  const authenticate = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(request.headers["authorization"] ?? "")
    if (match === null) {
      const detail = "Send the API key as `Authorization: Bearer <key>`."
      return yield* Effect.fail(
        problem(401, "UNAUTHENTICATED", "Missing API key", detail, challenge("invalid_request"))
      )
    }
    const principal = yield* identity.authenticate(match[1]!)
    if (Option.isNone(principal)) {
      return yield* Effect.fail(
        problem(
          401,
          "UNAUTHENTICATED",
          "Unknown API key",
          "The API key is unknown or revoked.",
          challenge("invalid_token")
        )
      )
    }
    if (!principal.value.scopes.has("mcp.use")) {
      return yield* Effect.fail(
        HttpServerResponse.jsonUnsafe(
          {
            type: problemType("INSUFFICIENT_SCOPE"),
            status: 403,
            title: "The API key lacks a scope",
            code: "INSUFFICIENT_SCOPE",
            required_scope: "mcp.use",
            detail: "The MCP endpoint needs the `mcp.use` scope."
          },
          { status: 403, contentType: "application/problem+json", headers: challenge("insufficient_scope") }
        )
      )
    }
    yield* Effect.annotateCurrentSpan({ "svc.org_id": principal.value.orgId, "svc.key_id": principal.value.keyId })
    return principal.value
  })

  const post = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest, principal: Principal) {
    const text = yield* request.text.pipe(Effect.option)
    if (Option.isNone(text)) {
      return problem(
        413,
        "PAYLOAD_TOO_LARGE",
        "Request body too large",
        `The body is over SVC_MAX_BODY_BYTES (${config.maxBodyBytes} bytes).`
      )
    }
    let body: unknown
    try {
      body = JSON.parse(text.value)
    } catch {
      return rpcError(400, -32700, "Parse error: the body is not JSON.")
    }
    const initialize = initializeOf(body)
    const sessionId = request.headers[SESSION_HEADER]
    let found: Caller["found"] = undefined
    let urlElicitation = false
    if (initialize === undefined) {
      if (sessionId === undefined) {
        return rpcError(400, -32000, "Bad Request: the Mcp-Session-Id header is required; initialize first.")
      }
      const called = calledServerOf(body)
      const checked = yield* sessions.check(principal.orgId, sessionId, called)
      if (!checked.open) return rpcError(404, -32001, "Session not found: initialize again.")
      if (called !== undefined) found = { name: called, server: checked.server }
      urlElicitation = checked.urlElicitation
    }
    const server = yield* protocol.server({
      orgId: principal.orgId,
      sessionId: initialize === undefined ? sessionId : undefined,
      found,
      urlElicitation
    })
    const transport = new WebStandardStreamableHTTPServerTransport()
    // The body is read already (`parsedBody`): the transport needs the headers.
    const web = new Request(new URL(request.url, "http://svc.invalid"), {
      method: "POST",
      headers: request.headers as Record<string, string>
    })
    const answer = yield* Effect.promise(async () => {
      await server.connect(transport)
      return transport.handleRequest(web, { parsedBody: body })
    })
    if (initialize === undefined || answer.status !== 200) return HttpServerResponse.fromWeb(answer)
    const opened = yield* sessions.open(principal.orgId, principal.keyId, initialize)
    const headers = new Headers(answer.headers)
    headers.set(SESSION_HEADER, opened)
    return HttpServerResponse.fromWeb(new Response(answer.body, { status: answer.status, headers }))
  })

  const handler = Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const principal = yield* authenticate(request).pipe(Effect.result)
    if (principal._tag === "Failure") return principal.failure
    switch (request.method) {
      case "POST":
        return yield* post(request, principal.success)
      case "DELETE": {
        const sessionId = request.headers[SESSION_HEADER]
        if (sessionId === undefined) return rpcError(400, -32000, "Bad Request: the Mcp-Session-Id header is required.")
        return (yield* sessions.close(principal.success.orgId, sessionId))
          ? HttpServerResponse.empty({ status: 200 })
          : rpcError(404, -32001, "Session not found.")
      }
      default:
        return rpcError(405, -32000, "Method not allowed: svc answers POST (and DELETE to end a session).", {
          allow: "POST, DELETE"
        })
    }
  }).pipe(Effect.withSpan("Endpoint.request"))

  yield* router.add("*", MCP_PATH, handler)
}))
