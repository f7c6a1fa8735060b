/**
 * Upstream MCP servers of the MCP gateway (docs/mcp.md): the servers an
 * organization's agents reach through svc's `/mcp` endpoint, the action
 * class each of their tools is governed as, and a test call that lists
 * their tools. The gateway itself speaks MCP (JSON-RPC), not this API.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Text, Timestamp, UrlOf, Uuid } from "./Common.ts"
import { InvalidUrl } from "./Deliveries.ts"
import { documented, notFound } from "./Documentation.ts"
import { InvalidHeaders, InvalidRequest, LimitReached, NotFound, Problem } from "./Errors.ts"
import { CustomHeaders, type RefusedHeaders, TRANSPORT_HEADERS } from "./HeaderNames.ts"
import { ActionClass } from "./Policies.ts"
import { Authentication, requireScope } from "./Security.ts"

/** The headers the gateway's MCP client sets itself: an upstream's headers may not replace them. */
export const MCP_OWN_HEADERS: RefusedHeaders = {
  names: ["content-type", "accept", "user-agent", "accept-encoding", "last-event-id"],
  prefixes: ["mcp-"]
}

/** Between a server's name and a tool's name in the names the gateway lists. */
export const TOOL_NAME_SEPARATOR = "__"

/** Most entries of a server's `tool_action_classes`. */
const MAX_TOOL_MAPPINGS = 500

export const McpServerName = Text.check(
  Schema.isPattern(/^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$/u, {
    message: "Expected 1 to 32 lower-case letters, digits or '-', starting and ending with a letter or digit"
  })
).annotate({
  description:
    "Unique in the organization. The gateway lists this server's tools as `<name>__<tool>`; a name cannot contain `__`, so the names of two servers' tools never collide."
})

/** An upstream tool's name as MCP allows it (1 to 128 of letters, digits, `_`, `-`, `.`). */
const UpstreamToolName = Text.check(
  Schema.isPattern(/^[A-Za-z0-9_.-]{1,128}$/u, {
    message: "Expected a tool name: 1 to 128 letters, digits, '_', '-' or '.'"
  })
)

const McpHeaders = CustomHeaders(
  [TRANSPORT_HEADERS, MCP_OWN_HEADERS],
  "Headers sent with every request to the server (e.g. `Authorization`), at most 10. Values are encrypted at rest and never returned; only the names are listed. Transport, hop-by-hop, trace-context and cookie headers and the MCP client's own (`Content-Type`, `Accept`, `User-Agent`, `Accept-Encoding`, `Last-Event-ID`, `Mcp-*`) are refused (`INVALID_HEADERS`), as are two names differing only in case and a value over 4096 UTF-8 bytes."
)

const ToolActionClasses = Schema.Record(UpstreamToolName, ActionClass)
  .check(Schema.isMaxProperties(MAX_TOOL_MAPPINGS, { message: `Expected at most ${MAX_TOOL_MAPPINGS} tools` }))
  .annotate({
    description:
      `The action class each named tool is governed as (at most ${MAX_TOOL_MAPPINGS}); a tool not named here is governed as \`default_action_class\`.`
  })

export const McpServer = Schema.Struct({
  id: Uuid,
  name: Schema.String,
  url_hint: Schema.String.annotate({ description: "Masked server address; the full URL is never returned" }),
  headers: Schema.Array(Schema.String).annotate({
    description: "Names of the server's headers, as given; their values are never returned"
  }),
  default_action_class: Schema.String,
  tool_action_classes: Schema.Record(Schema.String, Schema.String),
  created_at: Timestamp,
  created_by: Schema.String.annotate({ description: "Id of the API key that registered the server" })
})
export type McpServer = typeof McpServer.Type

export const CreateMcpServer = Schema.Struct({
  name: McpServerName,
  url: UrlOf(["https"], "Expected an https URL").annotate({
    description:
      "The server's Streamable HTTP endpoint: a public HTTPS address, checked again on a fresh resolution at every connection, as webhook endpoints are. It is a secret: never returned."
  }),
  headers: Schema.optionalKey(McpHeaders),
  default_action_class: Schema.optionalKey(ActionClass.annotate({
    description: "The action class of the server's tools not named in `tool_action_classes` (default `mcp.<name>`)"
  })),
  tool_action_classes: Schema.optionalKey(ToolActionClasses)
})
export type CreateMcpServer = typeof CreateMcpServer.Type

const McpServerList = Schema.Struct({ mcp_servers: Schema.Array(McpServer) })

const McpTool = Schema.Struct({
  name: Schema.String.annotate({ description: "The tool's name at the upstream server" }),
  exposed_as: Schema.String.annotate({ description: "The name the gateway lists it under: `<server name>__<tool>`" }),
  action_class: Schema.String.annotate({ description: "The action class its calls are governed as" }),
  description: Schema.optionalKey(Schema.String)
})

const McpServerTest = Schema.Struct({
  tools: Schema.Array(McpTool),
  duration_ms: Schema.Int
})

/** The upstream server could not be reached, or did not answer as an MCP server. */
export class UpstreamFailed extends Problem<UpstreamFailed>()("UpstreamFailed", {
  code: "UPSTREAM_FAILED",
  status: 502,
  title: "The MCP server did not answer"
}, {
  error: Schema.String.annotate({
    description: "What went wrong: the status, or the network, TLS or protocol error; never a header value"
  }),
  duration_ms: Schema.Int
}) {}

const ServerId = { id: Uuid }

const exampleServer = {
  id: "0192f4a0-7c1e-7a2b-9c3d-4e5f60718293",
  name: "github",
  url_hint: "https://mcp.example.com/…/mcp",
  headers: ["Authorization"],
  default_action_class: "mcp.github",
  tool_action_classes: { create_issue: "code.write" },
  created_at: "2026-11-28T09:00:00.000Z",
  created_by: "0192f49f-1111-7a2b-9c3d-4e5f60718293"
}

export class McpServersApi extends HttpApiGroup.make("mcpServers")
  .add(
    HttpApiEndpoint.post("create", "/v1/mcp-servers", {
      payload: CreateMcpServer,
      success: McpServer.pipe(HttpApiSchema.status(201)),
      error: [InvalidUrl, InvalidHeaders, InvalidRequest, LimitReached]
    }).pipe(
      requireScope(
        "org_config.write",
        "Registers an upstream MCP server that the organization's agents reach through the gateway (`/mcp`). At most `SVC_MAX_MCP_SERVERS_PER_ORG` per organization (409 `LIMIT_REACHED`); a name already registered is 400 (`field`: `name`)."
      ),
      documented({
        summary: "Register an MCP server",
        request: {
          name: "github",
          url: "https://mcp.example.com/mcp",
          headers: { Authorization: "Bearer ghp_example" },
          tool_action_classes: { create_issue: "code.write" }
        },
        response: exampleServer
      })
    ),
    HttpApiEndpoint.get("list", "/v1/mcp-servers", {
      success: McpServerList
    }).pipe(
      requireScope("org_config.read", "The organization's upstream MCP servers, by name."),
      documented({ summary: "List MCP servers", response: { mcp_servers: [exampleServer] } })
    ),
    HttpApiEndpoint.get("get", "/v1/mcp-servers/:id", {
      params: ServerId,
      success: McpServer,
      error: NotFound
    }).pipe(
      requireScope("org_config.read", "One upstream MCP server."),
      documented({ summary: "Get an MCP server", response: exampleServer, errors: { 404: notFound("MCP server") } })
    ),
    HttpApiEndpoint.delete("remove", "/v1/mcp-servers/:id", {
      params: ServerId,
      success: HttpApiSchema.NoContent,
      error: NotFound
    }).pipe(
      requireScope(
        "org_config.write",
        "Removes the server and its secrets; its tools leave the gateway's list at once. A call already approved and not yet run then ends as a tool error."
      ),
      documented({ summary: "Remove an MCP server", errors: { 404: notFound("MCP server") } })
    ),
    HttpApiEndpoint.post("test", "/v1/mcp-servers/:id/test", {
      params: ServerId,
      success: McpServerTest,
      error: [NotFound, UpstreamFailed]
    }).pipe(
      requireScope(
        "org_config.write",
        "Connects to the server now (the same address checks, `SVC_MCP_UPSTREAM_TIMEOUT` and `SVC_MCP_UPSTREAM_MAX_BYTES` as every call) and lists its tools, each with the name the gateway lists it under and its action class."
      ),
      documented({
        summary: "Test an MCP server",
        response: {
          tools: [{
            name: "create_issue",
            exposed_as: "github__create_issue",
            action_class: "code.write",
            description: "Open an issue"
          }],
          duration_ms: 84
        },
        errors: { 502: "The server could not be reached or did not answer as an MCP server (`UPSTREAM_FAILED`)." }
      })
    )
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "MCP servers")
  .annotate(
    OpenApi.Description,
    "The upstream MCP servers an organization's agents reach through svc's MCP endpoint (`/mcp`, docs/mcp.md): each server's tools are listed there as `<server name>__<tool>`, and every call is a governed step of the action class its tool is mapped to. URLs and header values are secrets, never returned."
  )
{}
