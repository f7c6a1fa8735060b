/**
 * A TCP proxy in front of a PostgreSQL server for the fault study
 * (`bench/faults.ts --lost-replies`): it passes the protocol through
 * untouched until armed with a piece of SQL; then the next execution of a
 * statement whose text holds it runs and commits on the server, and the
 * proxy closes that connection instead of passing the answer on. The
 * client sees a connection error for a statement that took effect: what a
 * database crash or a network fault between the commit and its
 * acknowledgement does, made to happen at a chosen statement.
 *
 * It reads message boundaries only (no TLS: svc connects to the study's
 * private server without it). A statement is matched by its Parse message
 * (prepared statements are parsed once per connection and bound many
 * times, so every connection's statement texts are kept by name); the
 * commit of an implicit transaction happens when the server processes the
 * Sync that follows, before its ReadyForQuery, so the connection is closed
 * at the ReadyForQuery that answers that Sync, none of the answer passed on.
 */
import { connect, createServer, type Socket } from "node:net"

export interface DroppedReply {
  /** When the answer was withheld and the connection closed (epoch ms). */
  readonly at: number
  /** The statement's text (its start). */
  readonly statement: string
}

interface Armed {
  readonly pattern: string
  readonly resolve: (dropped: DroppedReply) => void
}

/** Splits a stream into protocol messages; the first message of a client has no type byte. */
const framer = (untypedFirst: boolean, onMessage: (type: string, message: Buffer) => void) => {
  let buffer: Buffer = Buffer.alloc(0)
  let first = untypedFirst
  return (chunk: Buffer) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk])
    for (;;) {
      if (first) {
        if (buffer.length < 4) return
        const length = buffer.readInt32BE(0)
        if (buffer.length < length) return
        onMessage("", buffer.subarray(0, length))
        buffer = buffer.subarray(length)
        first = false
        continue
      }
      if (buffer.length < 5) return
      const length = buffer.readInt32BE(1)
      if (buffer.length < 1 + length) return
      onMessage(String.fromCharCode(buffer[0]!), buffer.subarray(0, 1 + length))
      buffer = buffer.subarray(1 + length)
    }
  }
}

const cString = (body: Buffer, from: number) => {
  const end = body.indexOf(0, from)
  return { value: body.subarray(from, end).toString("utf8"), next: end + 1 }
}

export const replyDropper = async (target: { readonly host: string; readonly port: number }) => {
  let armed: Armed | undefined
  const sockets = new Set<Socket>()

  const server = createServer((client) => {
    const upstream = connect(target.port, target.host)
    sockets.add(client)
    sockets.add(upstream)
    const statements = new Map<string, string>()
    let syncsSent = 0
    let readyReceived = 0
    /** The ReadyForQuery (by count) at which to close, and what for. */
    let dropAt: { ready: number; armed: Armed; statement: string } | undefined
    let closed = false
    const close = () => {
      if (closed) return
      closed = true
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
    }
    client.on(
      "data",
      framer(true, (type, message) => {
        if (type === "P") {
          const body = message.subarray(5)
          const name = cString(body, 0)
          statements.set(name.value, cString(body, name.next).value)
        } else if (type === "Q" && armed !== undefined && dropAt === undefined) {
          const text = cString(message.subarray(5), 0).value
          if (text.includes(armed.pattern)) {
            dropAt = { ready: syncsSent + 1, armed, statement: text }
            armed = undefined
          }
        } else if (type === "B" && armed !== undefined && dropAt === undefined) {
          const body = message.subarray(5)
          const portal = cString(body, 0)
          const text = statements.get(cString(body, portal.next).value) ?? ""
          if (text.includes(armed.pattern)) {
            // Answered by the ReadyForQuery of the next Sync.
            dropAt = { ready: syncsSent + 1, armed, statement: text }
            armed = undefined
          }
        }
        // The startup and a simple query are answered by a ReadyForQuery of their own, as a Sync is.
        if (type === "S" || type === "Q" || type === "") syncsSent++
        if (!closed) upstream.write(message)
      })
    )
    upstream.on(
      "data",
      framer(false, (type, message) => {
        if (closed) return
        if (type === "Z") readyReceived++
        if (dropAt !== undefined && readyReceived >= dropAt.ready - (type === "Z" ? 0 : 1)) {
          // Withheld: the answers to the armed statement, up to its ReadyForQuery.
          if (type === "Z" && readyReceived === dropAt.ready) {
            const { armed: done, statement } = dropAt
            close()
            done.resolve({ at: performance.timeOrigin + performance.now(), statement: statement.trim().slice(0, 120) })
          }
          return
        }
        client.write(message)
      })
    )
    client.on("error", close)
    upstream.on("error", close)
    client.on("close", close)
    upstream.on("close", close)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as { port: number }).port

  return {
    port,
    /** Drops the answer of the next execution of a statement holding `pattern`; resolves when it has. */
    drop: (pattern: string) =>
      new Promise<DroppedReply>((resolve) => {
        armed = { pattern, resolve }
      }),
    /** Forgets an arm that did not fire. */
    disarm: () => {
      armed = undefined
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      })
  }
}
