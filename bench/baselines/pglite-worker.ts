/**
 * The bare baseline's embedded database: PGlite in a worker thread (as svc
 * runs it, so database work does not block the thread serving HTTP),
 * answering `{id, text, params}` messages with rows; no wire protocol.
 */
import { PGlite } from "@electric-sql/pglite"
import { parentPort, workerData } from "node:worker_threads"

const db = await PGlite.create({ dataDir: (workerData as { dataDir: string }).dataDir })
const port = parentPort!
port.on("message", async (message: { id: number; text?: string; params?: Array<unknown>; close?: true }) => {
  if (message.close) {
    await db.close()
    port.postMessage({ id: message.id, rows: [] })
    return
  }
  try {
    port.postMessage({ id: message.id, rows: (await db.query(message.text!, message.params)).rows })
  } catch (error) {
    port.postMessage({ id: message.id, error: String(error) })
  }
})
port.postMessage({ ready: true })
