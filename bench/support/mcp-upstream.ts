/**
 * The upstream MCP server of the `mcp` scenario, a child process of its
 * own: the official SDK's `Server` over its Streamable HTTP transport in
 * stateless mode (a server and a transport per request, as the gateway's
 * integration tests run theirs), on an HTTPS loopback port with the
 * benchmark's certificate. One tool, `echo` `{text}`, answering
 * `echo: <text>`. `url` answers its address; `connections` the TLS
 * connections it accepted so far (each one a handshake its client paid).
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { createServer } from "node:https"
import { serve } from "./child.ts"

const tools = [{
  name: "echo",
  description: "Answers its text",
  inputSchema: { type: "object" as const, properties: { text: { type: "string" } } }
}]

let connections = 0
const http = createServer({ cert: process.env.BENCH_TLS_CERT!, key: process.env.BENCH_TLS_KEY! }, (req, res) => {
  const mcp = new Server({ name: "bench-upstream", version: "1.0.0" }, { capabilities: { tools: {} } })
  mcp.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }))
  mcp.setRequestHandler(CallToolRequestSchema, async (request) => ({
    content: [{ type: "text", text: `echo: ${String(request.params.arguments?.["text"])}` }]
  }))
  const transport = new StreamableHTTPServerTransport()
  res.on("close", () => {
    void transport.close()
    void mcp.close()
  })
  void mcp.connect(transport).then(() => transport.handleRequest(req, res))
})
http.on("secureConnection", () => void connections++)
const port = await new Promise<number>((resolve) =>
  http.listen(0, "127.0.0.1", () => resolve((http.address() as { port: number }).port))
)

serve({
  url: () => `https://127.0.0.1:${port}/mcp`,
  connections: () => connections
})
