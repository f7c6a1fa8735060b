/**
 * Runs PGlite and its socket server in a worker thread, so database work
 * (which PGlite does synchronously in WebAssembly) never blocks the thread
 * that serves HTTP. The parent talks to it over loopback TCP like to any
 * PostgreSQL server, with the same client and the same SQL.
 */
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { parentPort, workerData } from "node:worker_threads"

interface Options {
  readonly dataDir: string | undefined
  readonly host: string
  readonly maxConnections: number
}

const options = workerData as Options
const port = parentPort!

try {
  const db = await PGlite.create(options.dataDir === undefined ? {} : { dataDir: options.dataDir })
  const server = new PGLiteSocketServer({ db, host: options.host, port: 0, maxConnections: options.maxConnections })
  await server.start()
  port.on("message", async (message: unknown) => {
    if (message === "stop") {
      await server.stop()
      await db.close()
      port.postMessage({ type: "stopped" })
    }
  })
  port.postMessage({ type: "ready", address: server.getServerConn() })
} catch (cause) {
  port.postMessage({ type: "failed", message: cause instanceof Error ? cause.message : String(cause) })
}
