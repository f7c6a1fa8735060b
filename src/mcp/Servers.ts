/**
 * An organization's upstream MCP servers (docs/mcp.md, "Upstream
 * servers"): the one writer of `mcp_servers`. The URL and the header
 * values are secrets (`SecretStore`), read only to connect; the row keeps
 * what reads show. A tool's name at the gateway is `<server>__<tool>`
 * (`TOOL_NAME_SEPARATOR`): server names cannot contain it, so the first
 * separator splits a gateway name back into its server and tool.
 */
import { Context, Effect, Layer, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { InvalidUrl } from "../api/Deliveries.ts"
import { headersRefused, type InvalidHeaders, InvalidRequest, LimitReached, NotFound } from "../api/Errors.ts"
import { type CreateMcpServer, MCP_OWN_HEADERS, type McpServer, TOOL_NAME_SEPARATOR } from "../api/Mcp.ts"
import { checkHeaders } from "../outbound/HeaderRules.ts"
import { OutboundHttp } from "../outbound/OutboundHttp.ts"
import { SvcConfig } from "../platform/Config.ts"
import { newId } from "../platform/Ids.ts"
import { countForCap } from "../platform/OrgLimits.ts"
import { JsonColumn, rowsOf, Timestamp } from "../platform/Rows.ts"
import { type SecretOwner, SecretStore } from "../secrets/SecretStore.ts"

const urlOwner = (orgId: string, id: string): SecretOwner => ({ orgId, kind: "mcp_server_url", id })
const headerOwner = (orgId: string, id: string): SecretOwner => ({ orgId, kind: "mcp_server_header", id })

const OWN_HEADERS = { names: new Set(MCP_OWN_HEADERS.names), prefixes: MCP_OWN_HEADERS.prefixes }

const ServerColumns = Schema.Struct({
  id: Schema.String,
  org_id: Schema.String,
  name: Schema.String,
  url_hint: Schema.String,
  header_names: JsonColumn(Schema.Array(Schema.String)),
  default_action_class: Schema.String,
  tool_action_classes: JsonColumn(Schema.Record(Schema.String, Schema.String)),
  created_by: Schema.String,
  created_at: Timestamp
})
export type ServerRow = typeof ServerColumns.Type
export const ServerRows = rowsOf("mcp_servers", ServerColumns)

export const COLUMNS =
  "id, org_id, name, url_hint, header_names, default_action_class, tool_action_classes, created_by, created_at"

export const toServer = (row: ServerRow): McpServer => ({
  id: row.id,
  name: row.name,
  url_hint: row.url_hint,
  headers: [...row.header_names],
  default_action_class: row.default_action_class,
  tool_action_classes: { ...row.tool_action_classes },
  created_at: row.created_at,
  created_by: row.created_by
})

/** The action class a tool of `server` is governed as. */
export const actionClassOf = (server: ServerRow, tool: string): string =>
  Object.hasOwn(server.tool_action_classes, tool) ? server.tool_action_classes[tool]! : server.default_action_class

/** The name the gateway lists a server's tool under. */
export const exposedName = (server: Pick<ServerRow, "name">, tool: string) =>
  `${server.name}${TOOL_NAME_SEPARATOR}${tool}`

/** A gateway name split into its server's name and the upstream tool's, or `undefined` when it is not one. */
export const splitExposedName = (name: string): { readonly server: string; readonly tool: string } | undefined => {
  const at = name.indexOf(TOOL_NAME_SEPARATOR)
  if (at <= 0 || at + TOOL_NAME_SEPARATOR.length >= name.length) return undefined
  return { server: name.slice(0, at), tool: name.slice(at + TOOL_NAME_SEPARATOR.length) }
}

/** Where and how to connect to a server: secrets, for the outbound client only. */
export interface Connection {
  readonly server: ServerRow
  readonly url: Redacted.Redacted<string>
  readonly headers: ReadonlyArray<readonly [string, Redacted.Redacted<string>]>
}

export class McpServers extends Context.Service<McpServers, {
  readonly create: (orgId: string, keyId: string, input: CreateMcpServer) => Effect.Effect<
    McpServer,
    InvalidUrl | InvalidHeaders | InvalidRequest | LimitReached
  >
  readonly list: (orgId: string) => Effect.Effect<ReadonlyArray<ServerRow>>
  readonly find: (orgId: string, id: string) => Effect.Effect<ServerRow, NotFound>
  readonly findByName: (orgId: string, name: string) => Effect.Effect<ServerRow | undefined>
  readonly remove: (orgId: string, id: string) => Effect.Effect<void, NotFound>
  /** The server's URL and headers, opened; `undefined` when the server is gone. */
  readonly connection: (orgId: string, id: string) => Effect.Effect<Connection | undefined>
}>()("svc/mcp/McpServers") {
  static readonly layer = Layer.effect(
    McpServers,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const secrets = yield* SecretStore
      const outbound = yield* OutboundHttp
      const config = yield* SvcConfig

      const create = Effect.fn("McpServers.create")(function*(orgId: string, keyId: string, input: CreateMcpServer) {
        const verdict = checkHeaders(input.headers ?? {}, OWN_HEADERS)
        if (verdict._tag === "Refused") return yield* headersRefused(verdict)
        const checked = yield* outbound.check(input.url, orgId).pipe(
          Effect.mapError((unsafe) => new InvalidUrl({ field: "url", detail: unsafe.message }))
        )
        const limit = config.mcp.maxServersPerOrg
        const id = newId()
        const row = yield* sql.withTransaction(Effect.gen(function*() {
          if ((yield* countForCap(sql, orgId, "mcp_servers", limit)) >= limit) {
            return yield* new LimitReached({
              limit: "SVC_MAX_MCP_SERVERS_PER_ORG",
              limit_value: limit,
              detail:
                `The organization already has ${limit} MCP servers, the most allowed (SVC_MAX_MCP_SERVERS_PER_ORG); remove one first.`
            })
          }
          const row = yield* ServerRows.one(sql`
            INSERT INTO mcp_servers (id, org_id, name, url_hint, header_names, default_action_class, tool_action_classes, created_by)
            VALUES (${id}, ${orgId}, ${input.name}, ${checked.urlHint}, ${
            JSON.stringify(verdict.headers.map(([name]) => name))
          }::jsonb,
                    ${input.default_action_class ?? `mcp.${input.name}`}, ${
            JSON.stringify(input.tool_action_classes ?? {})
          }::jsonb, ${keyId})
            ON CONFLICT (org_id, name) DO NOTHING
            RETURNING ${sql.literal(COLUMNS)}
          `)
          if (row === undefined) {
            return yield* new InvalidRequest({
              field: "name",
              detail: "The organization already has an MCP server of this name."
            })
          }
          yield* secrets.put(urlOwner(orgId, id), "url", Redacted.make(checked.url))
          for (const [name, value] of verdict.headers) {
            yield* secrets.put(headerOwner(orgId, id), name, Redacted.make(value))
          }
          return row
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        return toServer(row)
      })

      const list = (orgId: string) =>
        ServerRows.all(sql`SELECT ${sql.literal(COLUMNS)} FROM mcp_servers WHERE org_id = ${orgId} ORDER BY name`)

      const findByName = (orgId: string, name: string) =>
        ServerRows.one(sql`SELECT ${sql.literal(COLUMNS)} FROM mcp_servers WHERE org_id = ${orgId} AND name = ${name}`)

      const find = (orgId: string, id: string) =>
        Effect.flatMap(
          ServerRows.one(sql`SELECT ${sql.literal(COLUMNS)} FROM mcp_servers WHERE org_id = ${orgId} AND id = ${id}`),
          (row) =>
            row === undefined ? Effect.fail(new NotFound({ detail: "No such MCP server." })) : Effect.succeed(row)
        )

      const remove = Effect.fn("McpServers.remove")(function*(orgId: string, id: string) {
        const removed = yield* sql.withTransaction(Effect.gen(function*() {
          const rows = yield* sql`DELETE FROM mcp_servers WHERE org_id = ${orgId} AND id = ${id} RETURNING id`
          if (rows.length === 0) return false
          yield* secrets.removeOwner(urlOwner(orgId, id))
          yield* secrets.removeOwner(headerOwner(orgId, id))
          return true
        })).pipe(Effect.orDie)
        if (!removed) return yield* new NotFound({ detail: "No such MCP server." })
      })

      const connection = Effect.fn("McpServers.connection")(function*(orgId: string, id: string) {
        const row = yield* ServerRows.one(
          sql`SELECT ${sql.literal(COLUMNS)} FROM mcp_servers WHERE org_id = ${orgId} AND id = ${id}`
        )
        if (row === undefined) return undefined
        const [url] = yield* secrets.list(urlOwner(orgId, id))
        if (url === undefined) return undefined
        const headers = yield* secrets.list(headerOwner(orgId, id))
        return { server: row, url: url.value, headers: headers.map((header) => [header.name, header.value] as const) }
      })

      return McpServers.of({ create, list, find, findByName, remove, connection })
    })
  )
}
