/**
 * The bare MCP gateway baseline of the `mcp` scenario, a child process of
 * its own: the least a gateway built on the official SDK on both sides
 * does for one call. `node:http` on loopback; per request the SDK's
 * `Server` over its web-standard Streamable HTTP transport in stateless
 * mode (as svc's `/mcp` answers), whose `tools/call` handler calls the
 * upstream through one kept SDK `Client` session (as svc's kept upstream
 * sessions do, keep-alive connections through Node's `fetch`). Nothing
 * else: no key, no session of its own, no governed step, no database, no
 * bounds. `tools/list` answers the upstream's tools under the name svc
 * gives them (`up__<tool>`), so the same client calls either. `GET` and
 * `DELETE` are 405, as on svc's `/mcp` without a session.
 *
 * `start` connects to the upstream and answers this gateway's URL.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { createServer } from "node:http"
import { serve } from "../support/child.ts"

const PREFIX = "up__"

const start = async (args: { upstream: string }) => {
  const upstream = new Client({ name: "bare-gateway", version: "1.0.0" })
  await upstream.connect(new StreamableHTTPClientTransport(new URL(args.upstream)))
  const { tools } = await upstream.listTools()
  const listed = tools.map((tool) => ({ ...tool, name: `${PREFIX}${tool.name}` }))

  const http = createServer(async (req, res) => {
    // As svc's `/mcp`: nothing is sent outside a request's answer, and there is no session to end.
    if (req.method !== "POST") return void res.writeHead(405, { allow: "POST" }).end()
    const chunks: Array<Buffer> = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"))
    const mcp = new Server({ name: "bare-gateway", version: "1.0.0" }, { capabilities: { tools: {} } })
    mcp.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: listed }))
    mcp.setRequestHandler(
      CallToolRequestSchema,
      async (request) =>
        upstream.callTool({ name: request.params.name.slice(PREFIX.length), arguments: request.params.arguments })
    )
    const transport = new WebStandardStreamableHTTPServerTransport()
    await mcp.connect(transport)
    const answer = await transport.handleRequest(
      new Request(`http://127.0.0.1${req.url}`, {
        method: "POST",
        headers: req.headers as Record<string, string>
      }),
      { parsedBody: body }
    )
    res.writeHead(answer.status, Object.fromEntries(answer.headers))
    res.end(Buffer.from(await answer.arrayBuffer()))
    void mcp.close()
  })
  const port = await new Promise<number>((resolve) =>
    http.listen(0, "127.0.0.1", () => resolve((http.address() as { port: number }).port))
  )
  return `http://127.0.0.1:${port}/mcp`
}

serve({ start })
