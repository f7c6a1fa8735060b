/**
 * One HTTP exchange through a pool, as undici's own handler API runs it
 * (`Dispatcher.dispatch`), instead of `pool.request`.
 *
 * Speeds up: `pool.request` builds, per request, a Node `Readable` for
 * the body, an async iterator to read it, a promise, and an `AbortSignal`
 * listener; the outbound guard needs none of them (it keeps at most a few
 * hundred bytes and aborts on its own deadline). Here the bytes are copied
 * as they arrive, the request is aborted through undici's controller, and
 * the caller is called back once. In CPU profiles of the `webhooks` drain
 * `pool.request`'s machinery was 8.3 % of svc's busy CPU, this 1.8 %
 * (`bench/notes/webhook-sender.md`).
 *
 * The rules are those of `OutboundHttp.send`: the body is read up to
 * `maxBytes` and never further (what is beyond is cut, the connection
 * aborted), a body of exactly `maxBytes` counts as cut unless its end
 * arrives with its last byte, and headers come back lower-case with
 * repeated ones joined by `, `.
 */
import type { Dispatcher } from "undici"

export interface Exchanged {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array
  readonly truncated: boolean
}

export interface ExchangeRequest {
  readonly path: string
  readonly method: "POST" | "GET"
  /** `[name, value, ...]`, names lower-case. */
  readonly headers: Array<string>
  readonly body: Uint8Array | string | null
  readonly maxBytes: number
  /** undici's own backstops; the caller keeps the deadline over the whole exchange. */
  readonly headersTimeout: number
  readonly bodyTimeout: number
}

/**
 * The answer, or what undici threw and whether the answer had begun
 * (its status and headers had arrived) when it did.
 */
export type ExchangeCallback = (error: unknown, exchanged: Exchanged | undefined, answering?: boolean) => void

/** Why a response was cut: the handler aborts the rest with this (never reported). */
const CUT = new Error("response body cut at its limit")

// Header names come from tenants' servers: maps without a prototype, so
// `__proto__` is a name like any other.
const joinHeaders = (headers: Record<string, string | Array<string> | undefined>): Record<string, string> => {
  const out: Record<string, string> = Object.create(null)
  for (const name in headers) {
    const value = headers[name]
    if (value !== undefined) out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value
  }
  return out
}

// Always a copy: a chunk is a view of the connection's read buffer.
const concat = (chunks: ReadonlyArray<Uint8Array>, size: number) => {
  const body = new Uint8Array(size)
  let offset = 0
  for (const chunk of chunks) {
    body.set(chunk, offset)
    offset += chunk.length
  }
  return body
}

class Handler implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined = undefined
  private status = 0
  private headers: Record<string, string> | undefined = undefined
  private readonly chunks: Array<Uint8Array> = []
  private size = 0
  /** Answered or aborted: nothing more is reported. */
  private done = false
  private readonly maxBytes: number
  private readonly callback: ExchangeCallback
  constructor(maxBytes: number, callback: ExchangeCallback) {
    this.maxBytes = maxBytes
    this.callback = callback
  }

  onRequestStart(controller: Dispatcher.DispatchController) {
    this.controller = controller
    // Aborted while it waited for a connection: it never starts.
    if (this.done) controller.abort(CUT)
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | Array<string> | undefined>
  ) {
    this.status = statusCode
    this.headers = joinHeaders(headers)
    if (this.maxBytes <= 0) this.answer(true)
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer) {
    if (this.done) return
    const room = this.maxBytes - this.size
    if (chunk.length > room) {
      if (room > 0) this.chunks.push(chunk.subarray(0, room))
      this.size += room
      this.answer(true)
      return
    }
    this.chunks.push(chunk)
    this.size += chunk.length
    if (this.size === this.maxBytes) {
      // Full: cut, unless the body's end comes with this same read.
      queueMicrotask(() => this.answer(true))
    }
  }

  onResponseEnd() {
    this.answer(false)
  }

  onResponseError(_controller: Dispatcher.DispatchController | null, error: Error) {
    if (this.done) return
    this.done = true
    this.callback(error, undefined, this.headers !== undefined)
  }

  /** The answer as read so far; `cut`: the rest is not read (the request is aborted). */
  answer(cut: boolean) {
    if (this.done) return
    this.done = true
    this.callback(null, {
      status: this.status,
      headers: this.headers ?? Object.create(null),
      body: concat(this.chunks, this.size),
      truncated: cut
    })
    if (cut) this.controller?.abort(CUT)
  }

  abort() {
    if (this.done) return
    this.done = true
    this.controller?.abort(CUT)
  }
}

/**
 * Starts one exchange; `callback` gets the answer or what undici threw,
 * exactly once, unless the answered `abort` came first (it ends the
 * exchange early).
 */
export const startExchange = (pool: Dispatcher, request: ExchangeRequest, callback: ExchangeCallback) => {
  const handler = new Handler(request.maxBytes, callback)
  // Invalid arguments are reported to the handler too (`onResponseError`).
  pool.dispatch({
    path: request.path,
    method: request.method,
    headers: request.headers,
    body: request.body,
    headersTimeout: request.headersTimeout,
    bodyTimeout: request.bodyTimeout
  }, handler)
  return { abort: () => handler.abort() }
}
