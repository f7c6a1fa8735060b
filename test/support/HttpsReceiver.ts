/**
 * A real HTTPS server on loopback for tests of outbound requests (webhook
 * receivers, OTLP collectors). It listens on an ephemeral port with a
 * certificate from the test CA (`tls.ts`), records every request it gets
 * and answers as the test scripts it.
 *
 * ```ts
 * const receiver = yield* HttpsReceiver.make()            // scoped: closed with the test
 * receiver.enqueue(Reply.status(503, { headers: { "retry-after": "1" } }), Reply.ok())
 * receiver.respond(() => Reply.status(204))               // after the queue: this
 * const url = receiver.url("/hooks/a1b2")                 // https://127.0.0.1:<port>/hooks/a1b2
 * const [first] = yield* receiver.waitForRequests(1)      // polls with a deadline
 * first.headers["x-svc-signature"]; first.body            // raw bytes as received
 * ```
 *
 * Scripted answers (`Reply`): status, headers and body; a delay before the
 * headers; a body trickled in chunks; a redirect; a hang (never answers);
 * a dropped connection. With `hosts: ["127.0.0.1", "127.0.0.2"]` the same
 * port listens on several loopback addresses, and each recorded request
 * says which one it reached and over which connection.
 */
import { Context, Duration, Effect, Layer, type Scope } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import { createServer, type Server } from "node:https"
import type { AddressInfo } from "node:net"
import type { TLSSocket } from "node:tls"
import { type TestCertificate, TestTls } from "./tls.ts"

export interface ReceivedRequest {
  /** 0 for the first request this receiver got. */
  readonly index: number
  readonly method: string
  /** Path and query as sent. */
  readonly path: string
  /** Lower-case names; repeated headers joined with `, `. */
  readonly headers: Readonly<Record<string, string>>
  /** Names and values exactly as sent, in order. */
  readonly rawHeaders: ReadonlyArray<string>
  /** The body bytes exactly as received. */
  readonly body: Uint8Array
  /** `Date.now()` when the request head arrived. */
  readonly receivedAt: number
  /** `Date.now()` when the whole body had arrived. */
  readonly completedAt: number
  /** The receiver address the connection reached (e.g. `127.0.0.2`). */
  readonly localAddress: string
  readonly remoteAddress: string
  /** Same number for requests over the same TLS connection (keep-alive). */
  readonly connectionId: number
  /** The SNI name the client sent, if any (none for IP literals). */
  readonly servername: string | undefined
  /** With `clientCa`: the subject's common name of the client certificate the client presented (verified against that CA). */
  readonly clientCertificate: string | undefined
}

export interface Reply {
  /** Default 200. */
  readonly status?: number
  readonly headers?: Readonly<Record<string, string>>
  readonly body?: string | Uint8Array
  /** Wait this long before sending the status line and headers. */
  readonly delayMs?: number
  /** Wait for this first (then `delayMs`): answers held until the test lets them go. */
  readonly after?: Promise<unknown>
  /** Send the headers at once, then the body in `chunks` pieces, one every `intervalMs`. */
  readonly trickle?: { readonly chunks: number; readonly intervalMs: number }
  /** Never answer (the request stays open until the client gives up or the receiver closes). */
  readonly hang?: boolean
  /** Close the connection without answering. */
  readonly drop?: boolean
}

export const Reply = {
  ok: (body: string | Uint8Array = "ok"): Reply => ({ status: 200, body }),
  status: (status: number, extra: Omit<Reply, "status"> = {}): Reply => ({ ...extra, status }),
  json: (value: unknown, status = 200): Reply => ({
    status,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(value)
  }),
  redirect: (location: string, status = 302): Reply => ({ status, headers: { location }, body: "" }),
  delayed: (delayMs: number, reply: Reply = { status: 200, body: "ok" }): Reply => ({ ...reply, delayMs }),
  trickle: (body: string | Uint8Array, chunks: number, intervalMs: number, status = 200): Reply => ({
    status,
    body,
    trickle: { chunks, intervalMs }
  }),
  hang: (): Reply => ({ hang: true }),
  drop: (): Reply => ({ drop: true })
}

export interface HttpsReceiverOptions {
  /** Loopback addresses to listen on, all on the same port (default `["127.0.0.1"]`). */
  readonly hosts?: ReadonlyArray<string>
  /** Certificate and key to serve (default: the shared test CA's `localhost` certificate). */
  readonly certificate?: TestCertificate
  /** How to answer requests the queue has no reply for (default 200 "ok"). */
  readonly respond?: (request: ReceivedRequest) => Reply
  /** Mutual TLS: a client certificate signed by this CA (PEM) is required, else the handshake fails. */
  readonly clientCa?: string
}

const peerName = (socket: TLSSocket) => {
  const cn = socket.getPeerCertificate().subject?.CN
  return Array.isArray(cn) ? cn.join(",") : cn
}

export class HttpsReceiver extends Context.Service<HttpsReceiver, {
  readonly port: number
  /** The first listening host. */
  readonly host: string
  /** `https://<host>:<port><path>` (default path `/`); `host` picks another listening address. */
  readonly url: (path?: string, host?: string) => string
  /** Every request received so far, in arrival order. */
  readonly requests: () => ReadonlyArray<ReceivedRequest>
  /** Waits until at least `count` requests arrived (default deadline 10 s, then a defect). */
  readonly waitForRequests: (count: number, timeout?: Duration.Input) => Effect.Effect<ReadonlyArray<ReceivedRequest>>
  /** Waits until some recorded request satisfies `predicate` (default deadline 10 s, then a defect). */
  readonly waitFor: (
    predicate: (request: ReceivedRequest) => boolean,
    timeout?: Duration.Input
  ) => Effect.Effect<ReceivedRequest>
  /** Replies for the next requests, in order; afterwards the `respond` handler answers. */
  readonly enqueue: (...replies: ReadonlyArray<Reply>) => void
  /** Replaces the handler for requests the queue has no reply for. */
  readonly respond: (handler: (request: ReceivedRequest) => Reply) => void
  /** Forgets recorded requests and queued replies (the handler stays). */
  readonly reset: () => void
  /** Number of TLS connections accepted so far. */
  readonly connections: () => number
  /** Most TLS connections open at the same time so far. */
  readonly peakOpenConnections: () => number
}>()("svc/test/HttpsReceiver") {
  /** A receiver that lives as long as the enclosing scope. */
  static readonly make = (
    options: HttpsReceiverOptions = {}
  ): Effect.Effect<HttpsReceiver["Service"], never, Scope.Scope> =>
    Effect.gen(function*() {
      const certificate = options.certificate ?? (yield* TestTls.shared)
      const hosts = options.hosts ?? ["127.0.0.1"]
      const received: Array<ReceivedRequest> = []
      const queue: Array<Reply> = []
      let handler = options.respond ?? (() => Reply.ok())
      let connectionCount = 0
      let openConnections = 0
      let peakOpen = 0
      const connectionIds = new WeakMap<object, number>()
      const timers = new Set<NodeJS.Timeout>()

      const later = (ms: number, action: () => void) => {
        const timer = setTimeout(() => {
          timers.delete(timer)
          action()
        }, ms)
        timers.add(timer)
        return timer
      }

      const answer = (reply: Reply, req: IncomingMessage, res: ServerResponse) => {
        if (reply.drop === true) {
          req.socket.destroy()
          return
        }
        if (reply.hang === true) return
        const send = () => {
          if (res.destroyed) return
          const body = typeof reply.body === "string"
            ? Buffer.from(reply.body)
            : Buffer.from(reply.body ?? new Uint8Array())
          const headers: Record<string, string> = { ...reply.headers }
          if (reply.trickle === undefined) {
            headers["content-length"] ??= String(body.length)
            res.writeHead(reply.status ?? 200, headers)
            res.end(body)
            return
          }
          res.writeHead(reply.status ?? 200, headers)
          res.flushHeaders()
          const chunks = Math.max(1, reply.trickle.chunks)
          const size = Math.ceil(body.length / chunks)
          let sent = 0
          const next = () => {
            if (res.destroyed) return
            const piece = body.subarray(sent * size, (sent + 1) * size)
            sent += 1
            if (sent >= chunks) {
              res.end(piece)
            } else {
              res.write(piece)
              later(reply.trickle!.intervalMs, next)
            }
          }
          later(reply.trickle.intervalMs, next)
        }
        const go = () => {
          if (reply.delayMs !== undefined && reply.delayMs > 0) later(reply.delayMs, send)
          else send()
        }
        if (reply.after === undefined) go()
        else void reply.after.then(go)
      }

      const onRequest = (req: IncomingMessage, res: ServerResponse) => {
        const receivedAt = Date.now()
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          const headers: Record<string, string> = {}
          for (const [name, value] of Object.entries(req.headers)) {
            if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value
          }
          const socket = req.socket as TLSSocket
          const request: ReceivedRequest = {
            index: received.length,
            method: req.method ?? "",
            path: req.url ?? "",
            headers,
            rawHeaders: [...req.rawHeaders],
            body: new Uint8Array(Buffer.concat(chunks)),
            receivedAt,
            completedAt: Date.now(),
            localAddress: socket.localAddress ?? "",
            remoteAddress: socket.remoteAddress ?? "",
            connectionId: connectionIds.get(socket) ?? -1,
            servername: typeof socket.servername === "string" ? socket.servername : undefined,
            clientCertificate: options.clientCa === undefined ? undefined : peerName(socket)
          }
          received.push(request)
          answer(queue.shift() ?? handler(request), req, res)
        })
      }

      const listen = (server: Server, host: string, port: number) =>
        Effect.callback<number>((resume) => {
          server.once("error", (error) => resume(Effect.die(error)))
          server.listen(port, host, () => resume(Effect.succeed((server.address() as AddressInfo).port)))
        })

      const servers: Array<Server> = []
      const close = Effect.forEach(servers, (server) =>
        Effect.callback<void>((resume) => {
          server.close(() => resume(Effect.void))
          server.closeAllConnections()
        }), { discard: true }).pipe(
          Effect.andThen(Effect.sync(() => {
            for (const timer of timers) clearTimeout(timer)
            timers.clear()
          }))
        )
      yield* Effect.addFinalizer(() => close)

      let port = 0
      for (const host of hosts) {
        const server = createServer({
          cert: certificate.cert,
          key: certificate.key,
          ...(options.clientCa === undefined
            ? {}
            : { ca: options.clientCa, requestCert: true, rejectUnauthorized: true })
        }, onRequest)
        server.on("secureConnection", (socket) => {
          connectionCount += 1
          connectionIds.set(socket, connectionCount)
          openConnections += 1
          peakOpen = Math.max(peakOpen, openConnections)
          socket.once("close", () => {
            openConnections -= 1
          })
        })
        // A client that hangs up mid-handshake or mid-request is part of what
        // these tests provoke; it must not crash the test process.
        server.on("tlsClientError", () => undefined)
        server.on("clientError", (_error, socket) => socket.destroy())
        servers.push(server)
        port = yield* listen(server, host, port)
      }

      const formatHost = (host: string) => (host.includes(":") ? `[${host}]` : host)
      const url = (path = "/", host = hosts[0]) => `https://${formatHost(host)}:${port}${path}`

      const waitForRequests = (count: number, timeout: Duration.Input = Duration.seconds(10)) =>
        Effect.gen(function*() {
          while (received.length < count) yield* Effect.sleep(Duration.millis(20))
          return [...received]
        }).pipe(
          Effect.timeoutOrElse({
            duration: timeout,
            orElse: () => Effect.die(new Error(`HttpsReceiver: expected ${count} requests, got ${received.length}`))
          })
        )

      const waitFor = (
        predicate: (request: ReceivedRequest) => boolean,
        timeout: Duration.Input = Duration.seconds(10)
      ) =>
        Effect.gen(function*() {
          while (true) {
            const found = received.find(predicate)
            if (found !== undefined) return found
            yield* Effect.sleep(Duration.millis(20))
          }
        }).pipe(
          Effect.timeoutOrElse({
            duration: timeout,
            orElse: () => Effect.die(new Error(`HttpsReceiver: no matching request among ${received.length}`))
          })
        )

      return HttpsReceiver.of({
        port,
        host: hosts[0],
        url,
        requests: () => [...received],
        waitForRequests,
        waitFor,
        enqueue: (...replies) => {
          queue.push(...replies)
        },
        respond: (next) => {
          handler = next
        },
        reset: () => {
          received.length = 0
          queue.length = 0
        },
        connections: () => connectionCount,
        peakOpenConnections: () => peakOpen
      })
    })

  /** The receiver as a layer (closed when the layer is released). */
  static readonly layer = (options: HttpsReceiverOptions = {}) =>
    Layer.effect(HttpsReceiver, HttpsReceiver.make(options))
}
