/**
 * Runs PGlite and its socket server (`EmbeddedSocket.ts`) in a worker thread, so database work
 * (which PGlite does synchronously in WebAssembly) never blocks the thread
 * that serves HTTP. The parent talks to it over a Unix socket like to any
 * PostgreSQL server, with the same client and the same SQL; the socket
 * lives in a directory only this user can enter (never a TCP port).
 */
import { PGlite } from "@electric-sql/pglite"
import { parentPort, workerData } from "node:worker_threads"
import { serveOnSocket } from "./EmbeddedSocket.ts"

interface Options {
  readonly dataDir: string | undefined
  /** The Unix socket to serve on. */
  readonly path: string
  readonly maxConnections: number
}

const options = workerData as Options
const port = parentPort!

try {
  const db = await PGlite.create(options.dataDir === undefined ? {} : { dataDir: options.dataDir })
  const server = await serveOnSocket(db, options.path, options.maxConnections)
  port.on("message", async (message: unknown) => {
    if (message === "stop") {
      // Closing the socket server removes the socket file.
      await server.stop()
      await db.close()
      port.postMessage({ type: "stopped" })
    }
  })
  port.postMessage({ type: "ready" })
} catch (cause) {
  port.postMessage({ type: "failed", message: cause instanceof Error ? cause.message : String(cause) })
}
