/**
 * `npx node bench/inprocess/embedded-statement.ts`: the CPU of one
 * statement on embedded PGlite, PGlite's `query` (Parse, Describe, Bind,
 * Describe, Execute, Sync: six calls into WebAssembly) against svc's
 * `runStatement` (`src/database/embedded/EmbeddedProtocol.ts`: one call) and the
 * same as a named prepared statement (`src/database/embedded/EmbeddedPrepared.ts`:
 * parsed once, then bound and executed), in one
 * process on one in-memory database, in alternating blocks (ABBA) so that
 * other work on the machine falls on both alike.
 *
 * Statements: an INSERT with seven parameters of svc's shape (uuid, text,
 * int4, jsonb, timestamptz) and a SELECT by primary key returning a row.
 * Reported: CPU µs per statement (user + system of this process).
 */
import { PGlite, types } from "@electric-sql/pglite"
import { randomUUID } from "node:crypto"
import { PreparedStatements } from "../../src/database/embedded/EmbeddedPrepared.ts"
import { runStatement } from "../../src/database/embedded/EmbeddedProtocol.ts"

const BLOCK = Number(process.env.BENCH_BLOCK ?? 2_000)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4)

const parsers = { [types.INT8]: (value: string) => BigInt(value) }
const db = await PGlite.create({ parsers })
await db.exec(`CREATE TABLE things (id uuid PRIMARY KEY, org_id uuid NOT NULL, name text NOT NULL, n int NOT NULL,
  body jsonb NOT NULL, at timestamptz NOT NULL, note text)`)

const org = randomUUID()
const INSERT = "INSERT INTO things (id, org_id, name, n, body, at, note) VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7)"
const SELECT = "SELECT id, org_id, name, n, body, at, note FROM things WHERE id = $1"
// svc's types: strings untyped (0), int4, timestamptz, null untyped.
const TYPES = [0, 0, 0, 23, 0, 1184, 0]

const cpu = () => {
  const usage = process.cpuUsage()
  return usage.user + usage.system
}

type Arm = "query" | "one call" | "prepared"
const prepared = new PreparedStatements()
const ids: Array<string> = []
const run = async (arm: Arm) => {
  const start = cpu()
  for (let i = 0; i < BLOCK; i++) {
    const id = randomUUID()
    ids.push(id)
    const params = [id, org, `thing ${i}`, i, JSON.stringify({ i, tags: ["a", "b"] }), new Date(), null]
    if (arm === "query") await db.query(INSERT, params)
    else await runStatement(db as never, INSERT, params, TYPES, false, arm === "prepared" ? prepared : undefined)
  }
  const inserted = cpu() - start
  const readStart = cpu()
  for (let i = 0; i < BLOCK; i++) {
    const id = ids[Math.floor(Math.random() * ids.length)]!
    if (arm === "query") await db.query(SELECT, [id])
    else await runStatement(db as never, SELECT, [id], [0], false, arm === "prepared" ? prepared : undefined)
  }
  return { insert: inserted / BLOCK, select: (cpu() - readStart) / BLOCK }
}

const totals: Record<Arm, { insert: Array<number>; select: Array<number> }> = {
  query: { insert: [], select: [] },
  "one call": { insert: [], select: [] },
  prepared: { insert: [], select: [] }
}
const ARMS: Array<Arm> = ["query", "one call", "prepared"]
for (const arm of ARMS) await run(arm)
for (let round = 0; round < ROUNDS; round++) {
  for (const arm of round % 2 === 0 ? ARMS : [...ARMS].reverse()) {
    const r = await run(arm)
    totals[arm].insert.push(r.insert)
    totals[arm].select.push(r.select)
  }
}
const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
console.table(
  Object.entries(totals).map(([arm, t]) => ({
    arm,
    "INSERT CPU µs": Math.round(median(t.insert)),
    "SELECT CPU µs": Math.round(median(t.select))
  }))
)
await db.close()
