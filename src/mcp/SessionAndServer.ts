/**
 * A request's MCP session check and, for a `tools/call`, the called tool's
 * server by name, in one statement: the session's row joined with the
 * organization's server of that name (none when the session is unknown to
 * the organization, a server of `undefined` when it has no such server).
 *
 * Speeds up: an allowed `tools/call` through the gateway, which checked its
 * session (`mcp_sessions`) and then looked its server up by name
 * (`mcp_servers`) in two statements; on a PostgreSQL server each statement
 * costs svc a write to the database's socket and its answer's handling
 * (about 150 µs of svc's CPU under a profile) besides PostgreSQL's own
 * work: 5.05 statements per call became 4.05 (`bench/notes/mcp.md`).
 */
import { Effect, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { rowsOf } from "../platform/Rows.ts"
import { COLUMNS, type ServerRow, ServerRows } from "./Servers.ts"

const SessionRows = rowsOf(
  "mcp_sessions",
  Schema.Struct({ session_closed: Schema.Boolean, url_elicitation: Schema.Boolean, id: Schema.NullOr(Schema.String) })
)

const SERVER_COLUMNS = COLUMNS.split(", ").map((column) => `m.${column}`).join(", ")

export interface SessionAndServer {
  /** The session is an open session of the organization. */
  readonly open: boolean
  /** The session's client declared URL-mode elicitation in its `initialize` (`Elicitation.ts`). */
  readonly urlElicitation: boolean
  /** The organization's server named `serverName`; `undefined` when there is none, or no name was asked. */
  readonly server: ServerRow | undefined
}

/** The session `id` of `orgId` (known to be a UUID), and its organization's server named `serverName`. */
export const sessionAndServer = (
  sql: SqlClient.SqlClient,
  orgId: string,
  id: string,
  serverName: string | undefined
): Effect.Effect<SessionAndServer> =>
  Effect.gen(function*() {
    const rows = yield* Effect.orDie(sql`
      SELECT s.closed_at IS NOT NULL AS session_closed, s.url_elicitation, ${sql.literal(SERVER_COLUMNS)}
      FROM mcp_sessions s
      LEFT JOIN mcp_servers m ON m.org_id = s.org_id AND m.name = ${serverName ?? null}
      WHERE s.id = ${id} AND s.org_id = ${orgId}
    `)
    const session = yield* SessionRows.one(Effect.succeed(rows))
    if (session === undefined || session.session_closed) {
      return { open: false, urlElicitation: false, server: undefined }
    }
    return {
      open: true,
      urlElicitation: session.url_elicitation,
      server: session.id === null ? undefined : yield* ServerRows.one(Effect.succeed(rows))
    }
  })
