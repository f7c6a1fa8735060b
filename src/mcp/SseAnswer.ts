/**
 * An upstream's `text/event-stream` answer to a POST, read whole already
 * (`OutboundHttp` reads every answer to its end), that carries one
 * JSON-RPC response and nothing else: handed to the SDK's client as the
 * `application/json` answer it is, which the Streamable HTTP transport
 * accepts as well. The SDK's client otherwise pipes the bytes through a
 * `TextDecoderStream` and an SSE parser stream (web streams), and
 * Node's `TextDecoderStream` builds an error with its stack each time
 * such a stream closes. Any other stream (several messages, a message
 * that is not a response, data that is not JSON, an event not yet ended)
 * is handed over as it came.
 *
 * Speeds up: an allowed `tools/call` through the gateway, whose upstream
 * (the SDK's server) answers each call as a one-event stream: the web
 * streams and that error were 4-5% of svc's busy CPU in a profile of the
 * `mcp` scenario, 1.1-1.3% of it the error alone; the SDK's client
 * transport alone spent 135-341 µs of CPU per such answer as a stream,
 * 31-49 µs as JSON (`bench/notes/mcp.md`).
 */

import { createParser } from "eventsource-parser"

const decoder = new TextDecoder()

/**
 * The one JSON-RPC response an SSE body carries, as JSON text; `undefined` unless that is all it carries.
 * Read by the parser the SDK's client reads streams with (`eventsource-parser`), fed the whole body at
 * once: an event not ended by an empty line is not dispatched, the SDK's client reads events of type
 * `message` (or none) only, and one without data carries no message.
 */
export const soleResponseOf = (body: Uint8Array): string | undefined => {
  const messages: Array<string> = []
  createParser({
    onEvent: (event) => {
      if ((event.event === undefined || event.event === "message") && event.data !== "") messages.push(event.data)
    }
  }).feed(decoder.decode(body))
  if (messages.length !== 1) return undefined
  try {
    const message = JSON.parse(messages[0]!) as unknown
    if (typeof message !== "object" || message === null || Array.isArray(message)) return undefined
    return "result" in message || "error" in message ? messages[0] : undefined
  } catch {
    return undefined
  }
}

/** The upstream's answer for the SDK's client: an SSE body of one response as JSON, any other as it came. */
export const sdkResponse = (
  status: number,
  headers: Readonly<Record<string, string>>,
  body: Uint8Array<ArrayBuffer> | null
) => {
  if (body !== null && headers["content-type"]?.toLowerCase().startsWith("text/event-stream")) {
    const json = soleResponseOf(body)
    if (json !== undefined) {
      return new Response(json, { status, headers: { ...headers, "content-type": "application/json" } })
    }
  }
  return new Response(body, { status, headers })
}
