/**
 * An upstream MCP server for tests of the gateway: the official SDK's
 * `Server` over its Streamable HTTP transport (stateless), on an HTTPS
 * loopback port with the test CA's certificate. Its tools:
 *
 * - `echo` `{text}`: answers `echo: <text>`;
 * - `delete_all`, `deploy`: answer `done <name>` (tests map them to refused
 *   or reviewed action classes);
 * - `fail`: answers a tool error of its own (`isError`);
 * - `hang`: never answers; `flood`: answers `floodBytes` characters.
 *
 * Every call is recorded (`calls`), with the headers it came with, and
 * every session a client initialized is counted (`initialized()`). With
 * `stateful`, the server keeps sessions (`Mcp-Session-Id`) and answers 404
 * to a session it does not know; `forgetSessions()` drops them all, as a
 * restarted server would. With `resetReused(true)`, a request that comes on
 * a connection which already carried one is met with the connection
 * destroyed, unanswered and unread (`resets()` counts them): a server
 * closing an idle keep-alive connection as the client sends on it.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import type { IncomingMessage, ServerResponse } from "node:http"
import { createServer } from "node:https"
import type { AddressInfo, Socket } from "node:net"
import { TestTls } from "./tls.ts"

export interface UpstreamCall {
  readonly tool: string
  readonly arguments: Record<string, unknown>
  readonly headers: Readonly<Record<string, string | Array<string> | undefined>>
}

export interface McpUpstream {
  /** `https://127.0.0.1:<port>/mcp` */
  readonly url: string
  readonly calls: Array<UpstreamCall>
  /** Sessions clients initialized so far (`notifications/initialized` received). */
  readonly initialized: () => number
  /** `stateful`: forgets every session, as a restarted server would. */
  readonly forgetSessions: () => void
  /** From now on, destroys (`true`) or answers (`false`) every request that is not its connection's first. */
  readonly resetReused: (on: boolean) => void
  /** Requests met with their connection destroyed. */
  readonly resets: () => number
}

const tools = ["echo", "delete_all", "deploy", "fail", "hang", "flood"].map((name) => ({
  name,
  description: `The ${name} tool`,
  inputSchema: { type: "object" as const, properties: { text: { type: "string" } } }
}))

/** A scoped upstream server: closed with the test's scope. */
export const mcpUpstream = (options: { readonly floodBytes?: number; readonly stateful?: boolean } = {}) =>
  Effect.gen(function*() {
    const tls = yield* TestTls.shared
    const calls: Array<UpstreamCall> = []
    const open = new Set<{ destroy: () => void }>()
    const sessions = new Map<string, StreamableHTTPServerTransport>()
    let initialized = 0
    const serverFor = (req: IncomingMessage) => {
      const mcp = new Server({ name: "upstream", version: "1.0.0" }, { capabilities: { tools: {} } })
      mcp.oninitialized = () => void initialized++
      mcp.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }))
      mcp.setRequestHandler(CallToolRequestSchema, async (request) => {
        const args = (request.params.arguments ?? {}) as Record<string, unknown>
        calls.push({ tool: request.params.name, arguments: args, headers: { ...req.headers } })
        switch (request.params.name) {
          case "echo":
            return { content: [{ type: "text", text: `echo: ${String(args["text"])}` }] }
          case "fail":
            return { content: [{ type: "text", text: "the disk is full" }], isError: true }
          case "hang":
            return await new Promise<never>(() => {})
          case "flood":
            return { content: [{ type: "text", text: "x".repeat(options.floodBytes ?? 2_000_000) }] }
          default:
            return { content: [{ type: "text", text: `done ${request.params.name} ${JSON.stringify(args)}` }] }
        }
      })
      return mcp
    }
    const stateless = (req: IncomingMessage, res: ServerResponse) => {
      const mcp = serverFor(req)
      const transport = new StreamableHTTPServerTransport()
      res.on("close", () => {
        void transport.close()
        void mcp.close()
      })
      void mcp.connect(transport).then(() => transport.handleRequest(req, res))
    }
    const stateful = (req: IncomingMessage, res: ServerResponse) => {
      const id = req.headers["mcp-session-id"]
      if (typeof id === "string") {
        const known = sessions.get(id)
        if (known === undefined) {
          res.writeHead(404, { "content-type": "application/json" })
          res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }))
          return
        }
        void known.handleRequest(req, res)
        return
      }
      // The calls' headers are those of the request that opened the session.
      const mcp = serverFor(req)
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sessionId) => void sessions.set(sessionId, transport)
      })
      void mcp.connect(transport).then(() => transport.handleRequest(req, res))
    }
    const handle = options.stateful === true ? stateful : stateless
    const served = new WeakMap<Socket, number>()
    let resetting = false
    let resets = 0
    const http = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
      const seen = (served.get(req.socket) ?? 0) + 1
      served.set(req.socket, seen)
      if (resetting && seen > 1) {
        resets++
        req.socket.destroy()
        return
      }
      handle(req, res)
    })
    http.on("connection", (socket) => {
      open.add(socket)
      socket.on("close", () => open.delete(socket))
    })
    yield* Effect.acquireRelease(
      Effect.promise(() => new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve))),
      () =>
        Effect.promise(() =>
          new Promise<void>((resolve) => {
            for (const socket of open) socket.destroy()
            http.close(() => resolve())
          })
        )
    )
    const { port } = http.address() as AddressInfo
    return {
      url: `https://127.0.0.1:${port}/mcp`,
      calls,
      initialized: () => initialized,
      forgetSessions: () => sessions.clear(),
      resetReused: (on) => {
        resetting = on
      },
      resets: () => resets
    } satisfies McpUpstream
  })
