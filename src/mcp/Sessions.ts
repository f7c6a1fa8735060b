/**
 * MCP sessions (docs/mcp.md, "Sessions"): the one writer of
 * `mcp_sessions`. `initialize` opens an agent session (the REST path's
 * `AgentSessions.create`) whose id is the `Mcp-Session-Id`; every later
 * request names it, and any svc process on the same database finds it
 * here. `DELETE /mcp` ends it; its agent session and steps stay. It keeps
 * whether the client declared URL-mode elicitation (`Elicitation.ts`).
 */
import { Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { AgentSessions } from "../agents/Sessions.ts"
import { rowsOf } from "../platform/Rows.ts"
import { type SessionAndServer, sessionAndServer } from "./SessionAndServer.ts"

const SessionRows = rowsOf("mcp_sessions", Schema.Struct({ id: Schema.String, closed: Schema.Boolean }))

/** An MCP session id as svc makes them (a UUID); anything else names no session. */
const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** What an `initialize` says of its client. */
export interface ClientInfo {
  readonly protocolVersion: string
  readonly clientName: string | undefined
  /** The client declared `capabilities.elicitation.url`. */
  readonly urlElicitation: boolean
}

export class McpSessions extends Context.Service<McpSessions, {
  /** A new session of the organization's key; answers its id. */
  readonly open: (
    orgId: string,
    keyId: string,
    client: ClientInfo
  ) => Effect.Effect<string>
  /**
   * Whether `id` is an open session of the organization and, when `serverName` is given (a
   * `tools/call`), the organization's server of that name, read in the same statement.
   */
  readonly check: (orgId: string, id: string, serverName: string | undefined) => Effect.Effect<SessionAndServer>
  /** Ends the session; false when it is not an open session of the organization. */
  readonly close: (orgId: string, id: string) => Effect.Effect<boolean>
}>()("svc/mcp/McpSessions") {
  static readonly layer = Layer.effect(
    McpSessions,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const agents = yield* AgentSessions

      const open = Effect.fn("McpSessions.open")(
        function*(
          orgId: string,
          keyId: string,
          client: ClientInfo
        ) {
          const session = yield* agents.create(orgId, {}).pipe(Effect.orDie)
          yield* sql`
          INSERT INTO mcp_sessions (id, org_id, key_id, protocol_version, client_name, url_elicitation)
          VALUES (${session.id}, ${orgId}, ${keyId}, ${client.protocolVersion.slice(0, 32)}, ${
            client.clientName?.slice(0, 200) ?? null
          }, ${client.urlElicitation})
        `.pipe(Effect.orDie)
          return session.id
        }
      )

      const check = (orgId: string, id: string, serverName: string | undefined) =>
        SESSION_ID.test(id)
          ? sessionAndServer(sql, orgId, id, serverName)
          : Effect.succeed({ open: false, urlElicitation: false, server: undefined })

      const close = (orgId: string, id: string) =>
        SESSION_ID.test(id)
          ? Effect.map(
            SessionRows.all(sql`
              UPDATE mcp_sessions SET closed_at = now() WHERE id = ${id} AND org_id = ${orgId} AND closed_at IS NULL
              RETURNING id, true AS closed
            `),
            (rows) => rows.length > 0
          )
          : Effect.succeed(false)

      return McpSessions.of({ open, check, close })
    })
  )
}
