/**
 * The MCP client of the `mcp` scenario, a child process of its own: the
 * official SDK's `Client` over the Streamable HTTP transport (keep-alive
 * connections, Node's `fetch`), one session. `connect` opens it (to svc's
 * `/mcp` with a key, or straight to the upstream server; the benchmark's
 * CA is trusted through `NODE_EXTRA_CA_CERTS`), `run` makes `count` calls
 * of `tool` one after another and answers each call's latency (ms),
 * `close` ends the session.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { serve } from "./child.ts"

let client: Client | undefined

const connect = async (args: { url: string; key?: string }) => {
  const url = new URL(args.url)
  if (url.hostname !== "127.0.0.1") throw new Error("the MCP client goes to loopback only")
  client = new Client({ name: "bench", version: "1.0.0" })
  await client.connect(
    new StreamableHTTPClientTransport(url, {
      requestInit: args.key === undefined ? {} : { headers: { authorization: `Bearer ${args.key}` } }
    })
  )
  return true
}

const run = async (args: { tool: string; count: number }) => {
  const latencies: Array<number> = []
  let errors = 0
  let firstError: string | undefined
  for (let i = 0; i < args.count; i++) {
    const started = performance.now()
    const result = await client!.callTool({ name: args.tool, arguments: { text: `call ${i}` } })
    latencies.push(performance.now() - started)
    const text = (result.content as Array<{ text?: string }>)[0]?.text
    if (result.isError === true || text !== `echo: call ${i}`) {
      errors++
      firstError ??= JSON.stringify(result).slice(0, 300)
    }
  }
  return { latencies, errors, firstError }
}

serve({
  connect,
  run,
  close: async () => {
    await client?.close()
    client = undefined
    return true
  }
})
