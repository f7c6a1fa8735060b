/**
 * The embedded database's socket server: PGlite (one database session)
 * served to PostgreSQL clients on a Unix socket, in the worker thread that
 * runs it (`embedded-worker.ts`).
 *
 * It replaces `@electric-sql/pglite-socket`'s server, which hands PGlite
 * one protocol message at a time and writes each answer to the socket as
 * it comes: five messages, five runs and about as many socket writes (each
 * waking the client's thread) per extended-protocol statement. Here every
 * complete message a read brings goes to PGlite in one run (PGlite's
 * `execProtocolRawStream` processes a buffer of messages until it is
 * consumed) and the answer leaves in one write.
 *
 * The rest is what that server did:
 * - connections share the one session in turns, one batch at a time, and
 *   while a transaction is open only its connection's batches run (the
 *   others wait); a connection that goes away in a transaction has it
 *   rolled back;
 * - an SSL request is answered `N` (no SSL), a cancel request is ignored,
 *   the startup message runs alone (PGlite answers it specially);
 * - at most `maxConnections` connections; a `Terminate` closes the socket.
 */
import type { PGlite } from "@electric-sql/pglite"
import * as net from "node:net"

const PROTOCOL_3 = 196608
const SSL_REQUEST = 80877103
const CANCEL_REQUEST = 80877102
const TERMINATE = 0x58 // 'X'

interface Connection {
  readonly socket: net.Socket
  buffer: Buffer
  started: boolean
  closed: boolean
}

interface Batch {
  readonly connection: Connection
  readonly data: Uint8Array
}

export interface EmbeddedSocketServer {
  readonly stop: () => Promise<void>
}

export const serveOnSocket = (db: PGlite, path: string, maxConnections: number): Promise<EmbeddedSocketServer> => {
  const connections = new Set<Connection>()
  const queue: Array<Batch> = []
  /** The connection whose batch ran last: the owner of an open transaction. */
  let owner: Connection | undefined
  let running = false
  let stopped = false
  const inTransaction = () => {
    try {
      return !stopped && db.isInTransaction()
    } catch {
      // Closed under us.
      return false
    }
  }

  const run = async (batch: Batch) => {
    const chunks: Array<Uint8Array> = []
    let size = 0
    await db.runExclusive(() =>
      db.execProtocolRawStream(batch.data, {
        onRawData: (data) => {
          // A view into PGlite's buffer: copied before the next message reuses it.
          chunks.push(Buffer.from(data))
          size += data.length
        }
      })
    )
    const { socket } = batch.connection
    if (size > 0 && !batch.connection.closed && socket.writable) {
      socket.write(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size))
    }
  }

  const next = (): Batch | undefined => {
    if (owner !== undefined && inTransaction()) {
      const at = queue.findIndex((batch) => batch.connection === owner)
      return at < 0 ? undefined : queue.splice(at, 1)[0]
    }
    return queue.shift()
  }

  const pump = async () => {
    if (running || stopped) return
    running = true
    try {
      for (let batch = next(); batch !== undefined && !stopped; batch = next()) {
        try {
          await run(batch)
        } catch {
          // PGlite failed outside the protocol (its own error answers are
          // in the output): this connection cannot go on.
          batch.connection.socket.destroy()
        }
        owner = batch.connection
      }
    } finally {
      running = false
    }
  }

  const submit = (connection: Connection, data: Uint8Array) => {
    queue.push({ connection, data })
    void pump()
  }

  /** Splits what arrived into batches: the startup message alone, then every complete message up to a Terminate. */
  const onData = (connection: Connection, chunk: Buffer) => {
    connection.buffer = connection.buffer.length === 0 ? chunk : Buffer.concat([connection.buffer, chunk])
    let buffer = connection.buffer
    while (!connection.started && buffer.length >= 8) {
      const length = buffer.readInt32BE(0)
      const code = buffer.readInt32BE(4)
      if (length === 8 && code === SSL_REQUEST) {
        connection.socket.write("N")
        buffer = buffer.subarray(8)
        continue
      }
      if (length === 16 && code === CANCEL_REQUEST) {
        buffer = buffer.subarray(16)
        continue
      }
      if (code !== PROTOCOL_3 || length < 8) {
        connection.socket.destroy()
        return
      }
      if (buffer.length < length) break
      connection.started = true
      submit(connection, Uint8Array.prototype.slice.call(buffer, 0, length))
      buffer = buffer.subarray(length)
    }
    if (connection.started) {
      let end = 0
      while (buffer.length - end >= 5) {
        const length = 1 + buffer.readInt32BE(end + 1)
        if (length < 5) {
          connection.socket.destroy()
          return
        }
        if (buffer.length - end < length) break
        if (buffer[end] === TERMINATE) {
          if (end > 0) submit(connection, Uint8Array.prototype.slice.call(buffer, 0, end))
          connection.socket.end()
          connection.buffer = Buffer.alloc(0)
          return
        }
        end += length
      }
      if (end > 0) {
        submit(connection, Uint8Array.prototype.slice.call(buffer, 0, end))
        buffer = buffer.subarray(end)
      }
    }
    // What is left is an incomplete message: kept (copied, so the read's buffer can go).
    connection.buffer = buffer.length === 0 ? Buffer.alloc(0) : Buffer.from(buffer)
  }

  const onClose = (connection: Connection) => {
    if (connection.closed) return
    connection.closed = true
    connections.delete(connection)
    for (let i = queue.length - 1; i >= 0; i--) if (queue[i]!.connection === connection) queue.splice(i, 1)
    if (owner === connection) {
      owner = undefined
      if (inTransaction()) {
        // Its transaction must not stay open for the next connection.
        void db.exec("ROLLBACK").catch(() => undefined).then(pump)
        return
      }
    }
    void pump()
  }

  const server = net.createServer((socket) => {
    if (connections.size >= maxConnections) {
      socket.end("Too many connections\n")
      return
    }
    const connection: Connection = { socket, buffer: Buffer.alloc(0), started: false, closed: false }
    connections.add(connection)
    socket.setNoDelay?.(true)
    socket.on("data", (chunk: Buffer) => onData(connection, chunk))
    socket.on("error", () => socket.destroy())
    socket.on("close", () => onClose(connection))
  })

  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(path, () => {
      server.off("error", reject)
      resolve({
        stop: () =>
          new Promise<void>((done) => {
            stopped = true
            queue.length = 0
            for (const connection of connections) connection.socket.destroy()
            server.close(() => done())
          })
      })
    })
  })
}
