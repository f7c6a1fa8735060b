/**
 * The embedded database's socket server (`EmbeddedSocket.ts`): PostgreSQL
 * clients share PGlite's one session in turns; an open transaction holds
 * the session for its connection alone, and is rolled back when that
 * connection goes away.
 */
import { PGlite } from "@electric-sql/pglite"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import pg from "pg"
import { type EmbeddedSocketServer, serveOnSocket } from "../../../src/platform/EmbeddedSocket.ts"

describe("the embedded socket server", () => {
  let db: PGlite
  let server: EmbeddedSocketServer
  let dir: string
  const connect = async () => {
    const client = new pg.Client({ host: dir, port: 5432, user: "postgres", database: "postgres" })
    await client.connect()
    return client
  }

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "svc-sock-"))
    db = await PGlite.create()
    server = await serveOnSocket(db, path.join(dir, ".s.PGSQL.5432"), 4)
    await db.exec("CREATE TABLE t (n int)")
  }, 60_000)

  afterAll(async () => {
    await server.stop()
    await db.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it("answers extended-protocol statements, failed ones included, each with its own result", async () => {
    const client = await connect()
    try {
      for (let i = 0; i < 20; i++) assert.strictEqual((await client.query("SELECT $1::int + 1 AS n", [i])).rows[0].n, i + 1)
      const failed = await client.query("SELECT 1/0").then(() => undefined, (error: Error) => error.message)
      assert.include(failed, "division by zero")
      assert.strictEqual((await client.query("SELECT 2 AS n")).rows[0].n, 2)
    } finally {
      await client.end()
    }
  })

  it("while one connection's transaction is open, another connection's statements wait for it", async () => {
    const a = await connect()
    const b = await connect()
    try {
      await a.query("BEGIN")
      await a.query("INSERT INTO t VALUES (1)")
      let seen: number | undefined
      const fromB = b.query("SELECT count(*)::int AS n FROM t").then((r) => (seen = r.rows[0].n))
      await new Promise((resolve) => setTimeout(resolve, 200))
      // B has not run inside A's transaction.
      assert.isUndefined(seen)
      await a.query("ROLLBACK")
      await fromB
      assert.strictEqual(seen, 0)
    } finally {
      await a.end()
      await b.end()
    }
  })

  it("a connection that goes away in a transaction has it rolled back; the others go on", async () => {
    const a = await connect()
    a.on("error", () => undefined)
    const b = await connect()
    try {
      await a.query("BEGIN")
      await a.query("INSERT INTO t VALUES (2)")
      const fromB = b.query("SELECT count(*)::int AS n FROM t")
      ;(a as unknown as { connection: { stream: { destroy: () => void } } }).connection.stream.destroy()
      assert.strictEqual((await fromB).rows[0].n, 0)
      assert.strictEqual((await b.query("SELECT count(*)::int AS n FROM t")).rows[0].n, 0)
    } finally {
      await a.end().catch(() => undefined)
      await b.end()
    }
  })
})
