/**
 * svc as an MCP client of an organization's upstream servers: the
 * official SDK's client over the Streamable HTTP transport, whose every
 * request goes through the one guarded outbound client (`OutboundHttp`):
 * the public-address checks on a fresh resolution at every request, the
 * request sent only on a keep-alive connection opened to the very
 * addresses that resolution checked (the pools are keyed by them), TLS
 * against the system store and `SVC_EXTRA_CA_FILE`, no redirects, a pool
 * per server (a server that hangs holds only its own connections), one
 * deadline over a call's exchanges (`SVC_MCP_UPSTREAM_TIMEOUT`: opening
 * a session when there is none, the call) and at most
 * `SVC_MCP_UPSTREAM_MAX_BYTES` of any answer. A message safe to repeat
 * (`initialize`, `notifications/initialized`, `tools/list`, `ping`) whose
 * connection was closed or reset before any answer is sent once more on
 * another connection; a `tools/call` never is. Sessions are kept per
 * (organization, server) in the process (`UpstreamSessions.ts`); the
 * server's test opens a session of its own. Upstream calls in flight are
 * bounded per organization and process (`SVC_MCP_UPSTREAM_CALLS_PER_ORG`).
 * No database connection is held while an upstream answers.
 *
 * What fails is an `UpstreamError` whose message names the status, the
 * network or TLS failure or the bound, never a URL, a header or a body.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { type CallToolResult, ErrorCode, McpError, type Tool } from "@modelcontextprotocol/sdk/types.js"
import { Context, Data, Duration, Effect, Layer, Redacted } from "effect"
import { AsyncLocalStorage } from "node:async_hooks"
import { VERSION } from "../api/Version.ts"
import { OutboundFailure, OutboundHttp } from "../outbound/OutboundHttp.ts"
import { SvcConfig } from "../platform/Config.ts"
import type { Connection } from "./Servers.ts"
import { sdkResponse } from "./SseAnswer.ts"
import { makeUpstreamSessions, SessionExpired } from "./UpstreamSessions.ts"

/** Why an upstream exchange gave no usable answer; `message` is safe to show and log. */
export class UpstreamError extends Data.TaggedError("UpstreamError")<{ readonly message: string }> {}

/** Tools one `tools/list` of an upstream server may answer, over all its pages. */
export const MAX_UPSTREAM_TOOLS = 1000

/** An upstream server to reach: its id, and its URL and headers, read only when a session must be opened. */
export interface UpstreamTarget {
  readonly serverId: string
  /** `undefined`: the server was removed. */
  readonly connection: Effect.Effect<Connection | undefined>
}

/** A target whose connection is at hand. */
export const targetOf = (connection: Connection): UpstreamTarget => ({
  serverId: connection.server.id,
  connection: Effect.succeed(connection)
})

/** Thrown inside the SDK's fetch; carried out as an `UpstreamError`. */
class Refused extends Error {}

/** A message of the SDK or of a refused exchange, without what it may quote (URLs are never in them; bodies may be). */
const safeMessage = (timeoutMs: number) => (error: unknown): string => {
  if (error instanceof Refused || error instanceof SessionExpired) return error.message
  if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) {
    return `no answer within SVC_MCP_UPSTREAM_TIMEOUT (${timeoutMs} ms)`
  }
  if (error instanceof Error) {
    const text = error.message.replace(/\s+/g, " ")
    return text.length > 300 ? `${text.slice(0, 300)}…` : text
  }
  return "the upstream server's answer could not be read"
}

/** Messages whose second sending changes nothing: a new session at most (`initialize`), never a tool run. */
const REPEATABLE_METHODS: ReadonlySet<string> = new Set([
  "initialize",
  "notifications/initialized",
  "tools/list",
  "ping"
])

/** Whether svc's JSON-RPC message (one, as the SDK sends them) may be sent again: its method says so. */
const isRepeatable = (body: string | undefined): boolean => {
  // The repeatable messages are short; a call's arguments are not parsed a second time.
  if (body === undefined || body.length > 4096) return false
  try {
    const message: unknown = JSON.parse(body)
    return typeof message === "object" && message !== null && "method" in message &&
      typeof message.method === "string" && REPEATABLE_METHODS.has(message.method)
  } catch {
    return false
  }
}

/** The deadline (`performance.now()`) of the call an exchange belongs to. */
const callDeadline = new AsyncLocalStorage<number>()

export class Upstream extends Context.Service<Upstream, {
  /** `fresh`: a session of its own, closed after (the server's test), not a kept one. */
  readonly listTools: (
    orgId: string,
    target: UpstreamTarget,
    options?: { readonly fresh?: boolean }
  ) => Effect.Effect<ReadonlyArray<Tool>, UpstreamError>
  readonly callTool: (
    orgId: string,
    target: UpstreamTarget,
    tool: string,
    args: Record<string, unknown>
  ) => Effect.Effect<CallToolResult, UpstreamError>
}>()("svc/mcp/Upstream") {
  static readonly layer = Layer.effect(
    Upstream,
    Effect.gen(function*() {
      const outbound = yield* OutboundHttp
      const config = yield* SvcConfig
      const timeoutMs = Duration.toMillis(config.mcp.upstreamTimeout)
      const maxBytes = config.mcp.upstreamMaxBytes
      const inFlight = new Map<string, number>()
      const run = Effect.runPromiseWith(yield* Effect.context<never>())
      const kept = makeUpstreamSessions()
      yield* Effect.addFinalizer(() => Effect.promise(kept.closeAll))
      const timeoutMessage = `no answer within SVC_MCP_UPSTREAM_TIMEOUT (${timeoutMs} ms)`

      /** The SDK's `fetch`: POSTs through the guarded client; no standing GET stream, no DELETE. */
      const guardedFetch =
        (orgId: string, connection: Connection) => async (url: string | URL, init?: RequestInit): Promise<Response> => {
          const method = (init?.method ?? "GET").toUpperCase()
          // The gateway asks one question at a time: it opens no stream for
          // server-initiated messages and ends no session (the upstream's idle timeout does).
          if (method !== "POST") return new Response(null, { status: 405 })
          const headers: Record<string, string> = {}
          new Headers(init?.headers).forEach((value, name) => {
            headers[name] = value
          })
          const inSession = headers["mcp-session-id"] !== undefined
          for (const [name, value] of connection.headers) headers[name] = Redacted.value(value)
          const remaining = (callDeadline.getStore() ?? performance.now() + timeoutMs) - performance.now()
          if (remaining <= 0) throw new Refused(timeoutMessage)
          const body = typeof init?.body === "string" ? init.body : undefined
          const answer = await run(
            outbound.send({
              url: String(url),
              method: "POST",
              headers,
              body,
              // A kept-alive connection the server closes as a message goes out
              // answers nothing: a message safe to repeat is sent once more on
              // another connection; a `tools/call` never (it may have run).
              repeatable: isRepeatable(body),
              timeout: Duration.millis(remaining),
              maxResponseBytes: maxBytes,
              partition: `mcp:${connection.server.id}`,
              orgId
            }).pipe(Effect.catchTag("OutboundFailure", (failure) => Effect.succeed(failure)))
          )
          if (answer instanceof OutboundFailure) {
            throw new Refused(
              answer.reason === "timeout"
                ? `${timeoutMessage}: ${answer.message}`
                : `the upstream server could not be reached: ${answer.message}`
            )
          }
          if (answer.truncated) {
            throw new Refused(
              `the upstream server's answer is longer than SVC_MCP_UPSTREAM_MAX_BYTES (${maxBytes} bytes)`
            )
          }
          if (answer.status === 404 && inSession) {
            throw new SessionExpired("the upstream server no longer knows svc's session (HTTP 404)")
          }
          if (answer.status >= 400) throw new Refused(`the upstream server answered HTTP ${answer.status}`)
          const answered = answer.status === 202 || answer.status === 204 ? null : answer.body.slice()
          return sdkResponse(answer.status, answer.headers, answered)
        }

      /** A new session with the server (`initialize`), within the current call's deadline. */
      const open = (orgId: string, target: UpstreamTarget) => async () => {
        const connection = await run(target.connection)
        if (connection === undefined) throw new Refused("the MCP server was removed from the organization")
        const client = new Client({ name: "svc", version: VERSION })
        const transport = new StreamableHTTPClientTransport(new URL(Redacted.value(connection.url)), {
          fetch: guardedFetch(orgId, connection)
        })
        const remaining = (callDeadline.getStore() ?? performance.now() + timeoutMs) - performance.now()
        try {
          await client.connect(transport, { timeout: Math.max(1, remaining) })
        } catch (error) {
          await client.close().catch(() => undefined)
          throw error
        }
        return client
      }

      /**
       * Runs `use` on a session with the server (the kept one, or `fresh`: one of its own, closed after);
       * one deadline over all of it, one slot of the organization's bound.
       */
      const session = <A>(
        orgId: string,
        target: UpstreamTarget,
        fresh: boolean,
        use: (client: Client, remainingMs: number) => Promise<A>
      ) =>
        Effect.acquireUseRelease(
          Effect.suspend(() => {
            const held = inFlight.get(orgId) ?? 0
            if (held >= config.mcp.upstreamsPerOrg) {
              return Effect.fail(
                new UpstreamError({
                  message:
                    `the organization already has ${held} upstream calls in flight (SVC_MCP_UPSTREAM_CALLS_PER_ORG); try again shortly`
                })
              )
            }
            inFlight.set(orgId, held + 1)
            return Effect.void
          }),
          () =>
            Effect.tryPromise({
              try: () => {
                const deadline = performance.now() + timeoutMs
                const remaining = () => Math.max(1, deadline - performance.now())
                return callDeadline.run(deadline, async () => {
                  if (!fresh) {
                    return kept.use(`${orgId} ${target.serverId}`, open(orgId, target), (c) => use(c, remaining()))
                  }
                  const client = await open(orgId, target)()
                  try {
                    return await use(client, remaining())
                  } finally {
                    await client.close().catch(() => undefined)
                  }
                })
              },
              catch: (error) => new UpstreamError({ message: safeMessage(timeoutMs)(error) })
            }).pipe(
              Effect.timeoutOrElse({
                duration: timeoutMs + 1_000,
                orElse: () => Effect.fail(new UpstreamError({ message: timeoutMessage }))
              })
            ),
          () =>
            Effect.sync(() => {
              const held = (inFlight.get(orgId) ?? 1) - 1
              if (held <= 0) inFlight.delete(orgId)
              else inFlight.set(orgId, held)
            })
        )

      const listTools = Effect.fn("Upstream.listTools")(
        function*(orgId: string, target: UpstreamTarget, options?: { readonly fresh?: boolean }) {
          yield* Effect.annotateCurrentSpan({ "svc.mcp_server_id": target.serverId })
          return yield* session(orgId, target, options?.fresh === true, async (client, remainingMs) => {
            const tools: Array<Tool> = []
            let cursor: string | undefined = undefined
            do {
              const page = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: remainingMs })
              tools.push(...page.tools)
              cursor = page.nextCursor
              if (tools.length > MAX_UPSTREAM_TOOLS) {
                throw new Refused(`the upstream server lists more than ${MAX_UPSTREAM_TOOLS} tools`)
              }
            } while (cursor !== undefined)
            return tools
          })
        }
      )

      const callTool = Effect.fn("Upstream.callTool")(function*(
        orgId: string,
        target: UpstreamTarget,
        tool: string,
        args: Record<string, unknown>
      ) {
        yield* Effect.annotateCurrentSpan({ "svc.mcp_server_id": target.serverId, "gen_ai.tool.name": tool })
        return yield* session(
          orgId,
          target,
          false,
          async (client, remainingMs) =>
            (await client.callTool({ name: tool, arguments: args }, undefined, {
              timeout: remainingMs
            })) as CallToolResult
        )
      })

      return Upstream.of({ listTools, callTool })
    })
  )
}
