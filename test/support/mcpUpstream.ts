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
 * Every call is recorded (`calls`), with the headers it came with.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import { createServer } from "node:https"
import type { AddressInfo } from "node:net"
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
}

const tools = ["echo", "delete_all", "deploy", "fail", "hang", "flood"].map((name) => ({
  name,
  description: `The ${name} tool`,
  inputSchema: { type: "object" as const, properties: { text: { type: "string" } } }
}))

/** A scoped upstream server: closed with the test's scope. */
export const mcpUpstream = (options: { readonly floodBytes?: number } = {}) =>
  Effect.gen(function*() {
    const tls = yield* TestTls.shared
    const calls: Array<UpstreamCall> = []
    const open = new Set<{ destroy: () => void }>()
    const http = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
      const mcp = new Server({ name: "upstream", version: "1.0.0" }, { capabilities: { tools: {} } })
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
      const transport = new StreamableHTTPServerTransport()
      res.on("close", () => {
        void transport.close()
        void mcp.close()
      })
      void mcp.connect(transport).then(() => transport.handleRequest(req, res))
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
    return { url: `https://127.0.0.1:${port}/mcp`, calls } satisfies McpUpstream
  })
