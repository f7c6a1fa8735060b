/**
 * The brokers the broker-destination tests publish to: the RabbitMQ
 * (127.0.0.1:5672, guest/guest) and NATS JetStream (127.0.0.1:4222)
 * servers of this machine (.ci/run starts them), reached directly or
 * through a TCP relay that a test can make refuse, hang or forward.
 */
import { jetstreamManager } from "@nats-io/jetstream"
import { connect as natsConnect, type NatsConnection } from "@nats-io/transport-node"
import { type Channel, type ChannelModel, connect as amqpConnect, type ConsumeMessage } from "amqplib"
import { Effect, type Scope } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import * as net from "node:net"
import * as tls from "node:tls"

export const RABBITMQ = "127.0.0.1:5672"
export const NATS = "127.0.0.1:4222"

/** A name no other test (or earlier run) uses. */
/** Listens on a loopback port until the scope closes, then ends `sockets` (the server's live connections) and closes. */
const listenScoped = (server: net.Server, sockets: ReadonlySet<net.Socket>): Effect.Effect<void, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))),
    () =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          for (const socket of sockets) socket.destroy()
          server.close(() => resolve())
        })
      )
  )

export const uniqueName = (prefix: string) => `${prefix}.${randomUUID().slice(0, 8)}`

export interface Relay {
  readonly port: number
  /** `reset`: accept and drop at once; `hang`: accept and never answer; `forward`: relay to the broker. */
  readonly mode: (mode: "reset" | "hang" | "forward") => void
  /** The connections relayed so far stay open but carry nothing more, either way (new ones follow the mode). */
  readonly freeze: () => void
}

/** A TCP relay on loopback in front of `target` (`host:port`), as long as the scope lives. */
export const makeRelay = (target: string): Effect.Effect<Relay, never, Scope.Scope> =>
  Effect.gen(function*() {
    let mode: "reset" | "hang" | "forward" = "reset"
    const sockets = new Set<net.Socket>()
    const frozen = new WeakSet<net.Socket>()
    const [host, port] = target.split(":") as [string, string]
    const server = net.createServer((socket) => {
      sockets.add(socket)
      socket.on("close", () => sockets.delete(socket))
      socket.on("error", () => undefined)
      if (mode === "reset") return socket.destroy()
      if (mode === "hang") return
      const upstream = net.connect(Number(port), host)
      upstream.on("error", () => socket.destroy())
      socket.on("close", () => upstream.destroy())
      upstream.on("close", () => socket.destroy())
      socket.on("data", (data) => frozen.has(socket) || upstream.write(data))
      upstream.on("data", (data) => frozen.has(socket) || socket.write(data))
    })
    yield* listenScoped(server, sockets)
    return {
      port: (server.address() as net.AddressInfo).port,
      mode: (next) => {
        mode = next
        // Connections of the earlier mode go: the next publish connects anew.
        for (const socket of sockets) socket.destroy()
      },
      freeze: () => {
        for (const socket of sockets) frozen.add(socket)
      }
    }
  })

/** A TLS endpoint on loopback with `certificate`, relaying the plaintext to `target` (`host:port`): amqps in front of RabbitMQ. */
export const makeTlsRelay = (
  target: string,
  certificate: { readonly cert: string; readonly key: string }
): Effect.Effect<number, never, Scope.Scope> =>
  Effect.gen(function*() {
    const [host, port] = target.split(":") as [string, string]
    const sockets = new Set<net.Socket>()
    const server = tls.createServer({ cert: certificate.cert, key: certificate.key }, (socket) => {
      const upstream = net.connect(Number(port), host)
      for (const s of [socket, upstream]) {
        sockets.add(s)
        s.on("error", () => undefined)
        s.on("close", () => {
          sockets.delete(s)
          socket.destroy()
          upstream.destroy()
        })
      }
      socket.pipe(upstream).pipe(socket)
    })
    server.on("tlsClientError", () => undefined)
    yield* listenScoped(server, sockets)
    return (server.address() as net.AddressInfo).port
  })

export interface Rabbit {
  readonly channel: Channel
  /** Declares a topic exchange. */
  readonly exchange: (name: string) => Effect.Effect<void>
  /** A queue bound to `exchange` for `routingKey`, collecting what arrives. */
  readonly queue: (exchange: string, routingKey: string) => Effect.Effect<{ readonly messages: Array<ConsumeMessage> }>
}

/** A connection of the test's own to RabbitMQ, closed with the scope (exchanges it declared are deleted). */
export const rabbit: Effect.Effect<Rabbit, never, Scope.Scope> = Effect.gen(function*() {
  const connection: ChannelModel = yield* Effect.acquireRelease(
    Effect.promise(() => amqpConnect(`amqp://guest:guest@${RABBITMQ}`)),
    (c) => Effect.promise(() => c.close().catch(() => undefined))
  )
  const channel = yield* Effect.promise(() => connection.createChannel())
  const declared: Array<string> = []
  yield* Effect.addFinalizer(() =>
    Effect.promise(() => Promise.all(declared.map((name) => channel.deleteExchange(name).catch(() => undefined))))
  )
  return {
    channel,
    exchange: (name) =>
      Effect.promise(async () => {
        await channel.assertExchange(name, "topic", { durable: false, autoDelete: false })
        declared.push(name)
      }),
    queue: (exchange, routingKey) =>
      Effect.promise(async () => {
        const { queue } = await channel.assertQueue("", { exclusive: true, autoDelete: true })
        await channel.bindQueue(queue, exchange, routingKey)
        const messages: Array<ConsumeMessage> = []
        await channel.consume(queue, (message) => message !== null && messages.push(message), { noAck: true })
        return { messages }
      })
  }
})

export interface Jet {
  readonly connection: NatsConnection
  /** Creates a stream taking `subject` (deleted with the scope). */
  readonly stream: (subject: string) => Effect.Effect<string>
  /** Every message the stream holds, in order. */
  readonly messages: (
    stream: string
  ) => Effect.Effect<ReadonlyArray<{ readonly data: Uint8Array; readonly headers: Record<string, string> }>>
}

/** A connection of the test's own to NATS, closed with the scope. */
export const jet: Effect.Effect<Jet, never, Scope.Scope> = Effect.gen(function*() {
  const connection = yield* Effect.acquireRelease(
    Effect.promise(() => natsConnect({ servers: NATS })),
    (c) => Effect.promise(() => c.close().catch(() => undefined))
  )
  const manager = yield* Effect.promise(() => jetstreamManager(connection))
  const created: Array<string> = []
  yield* Effect.addFinalizer(() =>
    Effect.promise(() => Promise.all(created.map((name) => manager.streams.delete(name).catch(() => false))))
  )
  return {
    connection,
    stream: (subject) =>
      Effect.promise(async () => {
        const name = `svc_test_${randomUUID().slice(0, 8)}`
        await manager.streams.add({ name, subjects: [subject] })
        created.push(name)
        return name
      }),
    messages: (stream) =>
      Effect.promise(async () => {
        const info = await manager.streams.info(stream)
        const out: Array<{ data: Uint8Array; headers: Record<string, string> }> = []
        for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
          const message = await manager.streams.getMessage(stream, { seq })
          if (message === null) continue
          const headers: Record<string, string> = {}
          for (const name of message.header?.keys() ?? []) headers[name] = message.header!.get(name)
          out.push({ data: message.data, headers })
        }
        return out
      })
  }
})

/** Every attempt of the endpoint's deliveries, oldest first. */
export const attemptsOf = (endpointId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ status_code: number | null; error: string | null; response_snippet: string | null }>`
      SELECT a.status_code, a.error, a.response_snippet
      FROM delivery_attempt_records a JOIN delivery_records d ON d.id = a.delivery_id
      WHERE d.target_id = ${endpointId} ORDER BY d.seq, a.attempt
    `
  }).pipe(Effect.orDie)

export interface FakeNats {
  readonly port: number
  /** Connections accepted so far. */
  readonly accepted: () => number
}

/**
 * A loopback server speaking enough of NATS for a JetStream publish: its
 * greeting (`info` merged into it: `tls_required` for a TLS-only server),
 * `PING`, subscriptions, and every publish with a reply subject answered
 * with `answer()` as the message on that reply subject. `hang`: accepts
 * connections and never says anything.
 */
export const fakeNats = (
  options: { readonly answer?: () => string; readonly info?: Record<string, unknown>; readonly hang?: boolean }
): Effect.Effect<FakeNats, never, Scope.Scope> =>
  Effect.gen(function*() {
    let accepted = 0
    const sockets = new Set<net.Socket>()
    const server = net.createServer((socket) => {
      accepted++
      sockets.add(socket)
      socket.on("close", () => sockets.delete(socket))
      socket.on("error", () => undefined)
      if (options.hang === true) return
      const info = {
        server_id: "fake",
        version: "2.10.0",
        proto: 1,
        headers: true,
        max_payload: 1_048_576,
        ...options.info
      }
      socket.write(`INFO ${JSON.stringify(info)}\r\n`)
      const subscriptions: Array<{ readonly prefix: string; readonly sid: string }> = []
      let buffered = Buffer.alloc(0)
      socket.on("data", (data) => {
        buffered = Buffer.concat([buffered, data])
        for (;;) {
          const end = buffered.indexOf("\r\n")
          if (end < 0) return
          const [verb, ...args] = buffered.subarray(0, end).toString().split(" ")
          let consumed = end + 2
          if (verb === "PUB" || verb === "HPUB") {
            const size = Number(args[args.length - 1])
            if (buffered.length < consumed + size + 2) return
            consumed += size + 2
            const reply = args.length === (verb === "PUB" ? 3 : 4) ? args[1]! : undefined
            const subscription = subscriptions.find((s) => reply?.startsWith(s.prefix))
            if (reply !== undefined && subscription !== undefined) {
              const payload = Buffer.from(options.answer?.() ?? "{}")
              socket.write(
                Buffer.concat([
                  Buffer.from(`MSG ${reply} ${subscription.sid} ${payload.length}\r\n`),
                  payload,
                  Buffer.from("\r\n")
                ])
              )
            }
          } else if (verb === "PING") socket.write("PONG\r\n")
          else if (verb === "SUB") {
            subscriptions.push({ prefix: args[0]!.replace(/\*$/, ""), sid: args[args.length - 1]! })
          }
          buffered = buffered.subarray(consumed)
        }
      })
    })
    yield* listenScoped(server, sockets)
    return { port: (server.address() as net.AddressInfo).port, accepted: () => accepted }
  })
