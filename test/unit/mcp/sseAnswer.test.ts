/**
 * An upstream's SSE answer of one JSON-RPC response is handed to the SDK's
 * client as JSON; any other stream as it came. Either way the SDK's client
 * delivers the same messages as from the stream itself.
 */
import { assert, describe, it } from "@effect/vitest"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { sdkResponse, soleResponseOf } from "../../../src/mcp/SseAnswer.ts"

const response = { jsonrpc: "2.0", id: 1, result: { content: [{ type: "text", text: "echo: é\nline" }] } }
const json = JSON.stringify(response)
const bytes = (text: string) => new TextEncoder().encode(text)
const SSE = { "content-type": "text/event-stream" }

/** The messages the SDK's client transport delivers for one POST answered with `answer`. */
const delivered = async (answer: () => Response) => {
  const transport = new StreamableHTTPClientTransport(new URL("https://upstream.invalid/mcp"), {
    fetch: async () => answer()
  })
  const messages: Array<JSONRPCMessage> = []
  transport.onmessage = (message) => void messages.push(message)
  transport.onerror = () => undefined
  await transport.start()
  await transport.send({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "echo", arguments: {} } })
  await new Promise((resolve) => setTimeout(resolve, 20))
  await transport.close()
  return messages
}

describe("an upstream's SSE answer", () => {
  it("one response event, whatever ids, comments, retry or other events beside it, is that response's JSON", () => {
    for (
      const stream of [
        `event: message\ndata: ${json}\n\n`,
        `data:${json}\n\n`,
        `\ufeff: hello\nid: 7\nretry: 1000\nevent: message\ndata: ${json}\n\n`,
        `id: 1\ndata:\n\nevent: ping\ndata: {"x":1}\n\ndata: ${json}\r\n\r\n`,
        `data: ${json}\r\rdata: ${json.slice(0, 5)}`
      ]
    ) assert.strictEqual(soleResponseOf(bytes(stream)), json, stream)
    // Data lines join with a newline.
    assert.strictEqual(soleResponseOf(bytes(`data: {"id":1,\ndata: "result":{}}\n\n`)), `{"id":1,\n"result":{}}`)
  })

  it("two messages, a request or notification, data that is not JSON, or an event not ended is no response", () => {
    for (
      const stream of [
        `data: ${json}\n\ndata: ${json}\n\n`,
        `data: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}\n\ndata: ${json}\n\n`,
        `data: {"jsonrpc":"2.0","id":2,"method":"sampling/createMessage","params":{}}\n\n`,
        `data: not json\n\n`,
        `data: [${json}]\n\n`,
        `data: ${json}\n`,
        `data: ${json}`,
        ``
      ]
    ) assert.isUndefined(soleResponseOf(bytes(stream)), stream)
  })

  it("the SDK's client delivers the same messages from the answer handed over as from the stream", async () => {
    for (
      const stream of [
        `event: message\nid: 3\ndata: ${json}\n\n`,
        `data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}\n\ndata: ${json}\n\n`,
        `data: not json\n\ndata: ${json}\n\n`
      ]
    ) {
      const asItCame = await delivered(() => new Response(bytes(stream), { status: 200, headers: SSE }))
      const handed = await delivered(() => sdkResponse(200, SSE, bytes(stream)))
      assert.deepStrictEqual(handed, asItCame, stream)
      assert.deepStrictEqual(asItCame.at(-1), response as never)
    }
    const converted = sdkResponse(200, SSE, bytes(`data: ${json}\n\n`))
    assert.strictEqual(converted.headers.get("content-type"), "application/json")
    const plain = sdkResponse(200, { "content-type": "application/json" }, bytes(json))
    assert.strictEqual(await plain.text(), json)
  })
})
