/** Handlers of the MCP servers group: register, list, read, remove, and a test that lists a server's tools. */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { NotFound } from "../api/Errors.ts"
import { UpstreamFailed } from "../api/Mcp.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { actionClassOf, exposedName, McpServers, toServer } from "./Servers.ts"
import { targetOf, Upstream } from "./Upstream.ts"

export const McpServersHandlers = HttpApiBuilder.group(
  Api,
  "mcpServers",
  Effect.fn(function*(handlers) {
    const servers = yield* McpServers
    const upstream = yield* Upstream
    return handlers.handleAll({
      create: ({ payload }) => CurrentPrincipal.use((p) => servers.create(p.orgId, p.keyId, payload)),
      list: () =>
        CurrentPrincipal.use((p) => Effect.map(servers.list(p.orgId), (rows) => ({ mcp_servers: rows.map(toServer) }))),
      get: ({ params }) => CurrentPrincipal.use((p) => Effect.map(servers.find(p.orgId, params.id), toServer)),
      remove: ({ params }) => CurrentPrincipal.use((p) => servers.remove(p.orgId, params.id)),
      test: ({ params }) =>
        CurrentPrincipal.use((p) =>
          Effect.gen(function*() {
            const connection = yield* servers.connection(p.orgId, params.id)
            if (connection === undefined) return yield* new NotFound({ detail: "No such MCP server." })
            const started = performance.now()
            const tools = yield* upstream.listTools(p.orgId, targetOf(connection), { fresh: true }).pipe(
              Effect.mapError((error) =>
                new UpstreamFailed({
                  error: error.message,
                  duration_ms: Math.round(performance.now() - started),
                  detail: error.message
                })
              )
            )
            return {
              tools: tools.map((tool) => ({
                name: tool.name,
                exposed_as: exposedName(connection.server, tool.name),
                action_class: actionClassOf(connection.server, tool.name),
                ...(tool.description === undefined ? {} : { description: tool.description })
              })),
              duration_ms: Math.round(performance.now() - started)
            }
          })
        )
    })
  })
)
