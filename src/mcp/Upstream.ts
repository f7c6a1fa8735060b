/**
 * svc as an MCP client of an organization's upstream servers: the
 * official SDK's client over the Streamable HTTP transport, whose every
 * request goes through the one guarded outbound client (`OutboundHttp`):
 * the public-address checks on a fresh resolution at every connection, TLS
 * against the system store and `SVC_EXTRA_CA_FILE`, no redirects, a pool
 * per server (a server that hangs holds only its own connections), one
 * deadline over the whole exchange (`SVC_MCP_UPSTREAM_TIMEOUT`: connect,
 * initialize, the call) and at most `SVC_MCP_UPSTREAM_MAX_BYTES` of any
 * answer. Upstream calls in flight are bounded per organization and
 * process (`SVC_MCP_UPSTREAM_CALLS_PER_ORG`). No database connection is
 * held while an upstream answers.
 *
 * What fails is an `UpstreamError` whose message names the status, the
 * network or TLS failure or the bound, never a URL, a header or a body.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js"
import { Context, Data, Duration, Effect, Layer, Redacted } from "effect"
import { VERSION } from "../api/Version.ts"
import { OutboundFailure, OutboundHttp } from "../outbound/OutboundHttp.ts"
import { SvcConfig } from "../platform/Config.ts"
import type { Connection } from "./Servers.ts"

/** Why an upstream exchange gave no usable answer; `message` is safe to show and log. */
export class UpstreamError extends Data.TaggedError("UpstreamError")<{ readonly message: string }> {}

/** Tools one `tools/list` of an upstream server may answer, over all its pages. */
export const MAX_UPSTREAM_TOOLS = 1000

/** Thrown inside the SDK's fetch; carried out as an `UpstreamError`. */
class Refused extends Error {}

/** A message of the SDK or of a refused exchange, without what it may quote (URLs are never in them; bodies may be). */
const safeMessage = (error: unknown): string => {
  if (error instanceof Refused) return error.message
  if (error instanceof Error) {
    const text = error.message.replace(/\s+/g, " ")
    return text.length > 300 ? `${text.slice(0, 300)}…` : text
  }
  return "the upstream server's answer could not be read"
}

export class Upstream extends Context.Service<Upstream, {
  readonly listTools: (orgId: string, connection: Connection) => Effect.Effect<ReadonlyArray<Tool>, UpstreamError>
  readonly callTool: (
    orgId: string,
    connection: Connection,
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

      /** The SDK's `fetch`: POSTs through the guarded client; no standing GET stream, no DELETE. */
      const guardedFetch =
        (orgId: string, connection: Connection, deadline: number) =>
        async (url: string | URL, init?: RequestInit): Promise<Response> => {
          const method = (init?.method ?? "GET").toUpperCase()
          // The gateway asks one question at a time: it opens no stream for
          // server-initiated messages and ends no session (the upstream's idle timeout does).
          if (method !== "POST") return new Response(null, { status: 405 })
          const headers: Record<string, string> = {}
          new Headers(init?.headers).forEach((value, name) => {
            headers[name] = value
          })
          for (const [name, value] of connection.headers) headers[name] = Redacted.value(value)
          const remaining = deadline - performance.now()
          if (remaining <= 0) throw new Refused(`no answer within SVC_MCP_UPSTREAM_TIMEOUT (${timeoutMs} ms)`)
          const answer = await run(
            outbound.send({
              url: String(url),
              method: "POST",
              headers,
              body: typeof init?.body === "string" ? init.body : undefined,
              timeout: Duration.millis(remaining),
              maxResponseBytes: maxBytes,
              partition: `mcp:${connection.server.id}`,
              orgId
            }).pipe(Effect.catchTag("OutboundFailure", (failure) => Effect.succeed(failure)))
          )
          if (answer instanceof OutboundFailure) {
            throw new Refused(
              answer.reason === "timeout"
                ? `no answer within SVC_MCP_UPSTREAM_TIMEOUT (${timeoutMs} ms): ${answer.message}`
                : `the upstream server could not be reached: ${answer.message}`
            )
          }
          if (answer.truncated) {
            throw new Refused(
              `the upstream server's answer is longer than SVC_MCP_UPSTREAM_MAX_BYTES (${maxBytes} bytes)`
            )
          }
          if (answer.status >= 400) throw new Refused(`the upstream server answered HTTP ${answer.status}`)
          const body = answer.status === 202 || answer.status === 204 ? null : answer.body.slice()
          return new Response(body, { status: answer.status, headers: answer.headers })
        }

      /** Connects (initialize), runs `use`, closes; one deadline over all of it, one slot of the organization's bound. */
      const session = <A>(orgId: string, connection: Connection, use: (client: Client) => Promise<A>) =>
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
              try: async (signal) => {
                const deadline = performance.now() + timeoutMs
                const client = new Client({ name: "svc", version: VERSION })
                const transport = new StreamableHTTPClientTransport(new URL(Redacted.value(connection.url)), {
                  fetch: guardedFetch(orgId, connection, deadline)
                })
                const closed = () => client.close().catch(() => undefined)
                signal.addEventListener("abort", closed, { once: true })
                try {
                  await client.connect(transport, { timeout: timeoutMs, signal })
                  return await use(client)
                } finally {
                  await closed()
                }
              },
              catch: (error) => new UpstreamError({ message: safeMessage(error) })
            }).pipe(
              Effect.timeoutOrElse({
                duration: timeoutMs + 1_000,
                orElse: () =>
                  Effect.fail(
                    new UpstreamError({ message: `no answer within SVC_MCP_UPSTREAM_TIMEOUT (${timeoutMs} ms)` })
                  )
              })
            ),
          () =>
            Effect.sync(() => {
              const held = (inFlight.get(orgId) ?? 1) - 1
              if (held <= 0) inFlight.delete(orgId)
              else inFlight.set(orgId, held)
            })
        )

      const listTools = Effect.fn("Upstream.listTools")(function*(orgId: string, connection: Connection) {
        yield* Effect.annotateCurrentSpan({ "svc.mcp_server_id": connection.server.id })
        return yield* session(orgId, connection, async (client) => {
          const tools: Array<Tool> = []
          let cursor: string | undefined = undefined
          do {
            const page = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: timeoutMs })
            tools.push(...page.tools)
            cursor = page.nextCursor
            if (tools.length > MAX_UPSTREAM_TOOLS) {
              throw new Refused(`the upstream server lists more than ${MAX_UPSTREAM_TOOLS} tools`)
            }
          } while (cursor !== undefined)
          return tools
        })
      })

      const callTool = Effect.fn("Upstream.callTool")(function*(
        orgId: string,
        connection: Connection,
        tool: string,
        args: Record<string, unknown>
      ) {
        yield* Effect.annotateCurrentSpan({ "svc.mcp_server_id": connection.server.id, "gen_ai.tool.name": tool })
        return yield* session(
          orgId,
          connection,
          async (client) =>
            (await client.callTool({ name: tool, arguments: args }, undefined, {
              timeout: timeoutMs
            })) as CallToolResult
        )
      })

      return Upstream.of({ listTools, callTool })
    })
  )
}
