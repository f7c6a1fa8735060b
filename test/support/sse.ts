/** A real Server-Sent Events client for tests: fetch and a stream reader, parsed by the SSE rules. */

export interface SseEvent {
  readonly id: string | undefined
  readonly event: string
  readonly data: string
}

export type SseFrame = { readonly _tag: "event"; readonly event: SseEvent } | {
  readonly _tag: "comment"
  readonly text: string
}

export interface SseConnection {
  readonly status: number
  readonly headers: Headers
  /** The next frame (event or comment); rejects after `timeoutMs`. */
  readonly next: (timeoutMs?: number) => Promise<SseFrame>
  /** The next `n` events, skipping comments. */
  readonly events: (n: number, timeoutMs?: number) => Promise<Array<SseEvent>>
  readonly close: () => void
}

export const openSse = async (
  url: string,
  options: { readonly key?: string; readonly cookie?: string; readonly lastEventId?: string }
): Promise<SseConnection> => {
  const controller = new AbortController()
  const response = await fetch(url, {
    headers: {
      ...(options.key === undefined ? {} : { authorization: `Bearer ${options.key}` }),
      ...(options.cookie === undefined ? {} : { cookie: options.cookie }),
      accept: "text/event-stream",
      ...(options.lastEventId === undefined ? {} : { "last-event-id": options.lastEventId })
    },
    signal: controller.signal
  })
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
  let buffer = ""
  const frames: Array<SseFrame> = []
  // One read at a time: a read abandoned by a timeout stays the next one.
  let pending: Promise<ReadableStreamReadResult<string>> | undefined

  const parseBlock = (block: string) => {
    let id: string | undefined
    let event = "message"
    const data: Array<string> = []
    let comment: string | undefined
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) {
        comment = line.slice(1).trim()
        continue
      }
      const colon = line.indexOf(":")
      const field = colon === -1 ? line : line.slice(0, colon)
      let value = colon === -1 ? "" : line.slice(colon + 1)
      if (value.startsWith(" ")) value = value.slice(1)
      if (field === "id") id = value
      else if (field === "event") event = value
      else if (field === "data") data.push(value)
    }
    if (data.length > 0) frames.push({ _tag: "event", event: { id, event, data: data.join("\n") } })
    else if (comment !== undefined) frames.push({ _tag: "comment", text: comment })
  }

  const next = async (timeoutMs = 10_000): Promise<SseFrame> => {
    const deadline = Date.now() + timeoutMs
    while (frames.length === 0) {
      const remaining = deadline - Date.now()
      if (remaining <= 0) throw new Error("no SSE frame in time")
      let timer: ReturnType<typeof setTimeout> | undefined
      pending ??= reader.read()
      const chunk = await Promise.race([
        pending,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error("no SSE frame in time")), remaining)
        })
      ]).finally(() => clearTimeout(timer))
      pending = undefined
      if (chunk.done) throw new Error("SSE stream ended")
      buffer += chunk.value.replaceAll("\r\n", "\n")
      let end: number
      while ((end = buffer.indexOf("\n\n")) !== -1) {
        parseBlock(buffer.slice(0, end))
        buffer = buffer.slice(end + 2)
      }
    }
    return frames.shift()!
  }

  const events = async (n: number, timeoutMs = 10_000) => {
    const out: Array<SseEvent> = []
    while (out.length < n) {
      const frame = await next(timeoutMs)
      if (frame._tag === "event") out.push(frame.event)
    }
    return out
  }

  return {
    status: response.status,
    headers: response.headers,
    next,
    events,
    close: () => {
      controller.abort()
      reader.cancel().catch(() => undefined)
    }
  }
}
