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

const decoder = new TextDecoder()

/**
 * The one JSON-RPC response an SSE body carries, as JSON text; `undefined` unless that is all it carries.
 * Events as the SDK's client reads them (`eventsource-parser`): an event ends at an empty line, data lines
 * join with a newline, events of another type than `message` and events without data are skipped.
 */
export const soleResponseOf = (body: Uint8Array): string | undefined => {
  let text = decoder.decode(body)
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1)
  const lines = text.split(/\r\n|\r|\n/)
  // The last piece has no line end: a stream read to its end leaves it unread.
  lines.pop()
  let found: string | undefined
  let data: Array<string> = []
  let type: string | undefined
  for (const line of lines) {
    if (line === "") {
      if (data.length > 0 && (type === undefined || type === "message")) {
        const joined = data.join("\n")
        if (joined !== "") {
          if (found !== undefined) return undefined
          found = joined
        }
      }
      data = []
      type = undefined
      continue
    }
    if (line.charCodeAt(0) === 58) continue
    const colon = line.indexOf(":")
    const field = colon === -1 ? line : line.slice(0, colon)
    const value = colon === -1 ? "" : line.slice(line.charCodeAt(colon + 1) === 32 ? colon + 2 : colon + 1)
    if (field === "data") data.push(value)
    else if (field === "event") type = value === "" ? undefined : value
  }
  if (found === undefined) return undefined
  try {
    const message = JSON.parse(found) as unknown
    if (typeof message !== "object" || message === null || Array.isArray(message)) return undefined
    return "result" in message || "error" in message ? found : undefined
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
