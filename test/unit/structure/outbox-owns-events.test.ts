/**
 * The outbox (`src/outbox`) is the only code that writes the `events` table
 * and its dispatch cursor (`event_dispatch`): how an event's body is built,
 * where the cursor stands and what may be pruned are read in one file.
 * Capabilities read events and call the outbox to write them. Migrations
 * (the tables' definitions) are the exception.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const src = path.join(import.meta.dirname, "../../../src")

const filesOf = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesOf(path.join(dir, entry.name)) : entry.name.endsWith(".ts") ? [path.join(dir, entry.name)] : []
  )

const WRITE = /\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(events|event_dispatch)\b/gi

describe("the outbox owns its tables", () => {
  it("no statement outside src/outbox (and the migrations) writes events or event_dispatch", () => {
    const found: Array<string> = []
    for (const file of filesOf(src)) {
      const relative = path.relative(src, file)
      if (relative.startsWith(`outbox${path.sep}`) || relative.startsWith(path.join("database", "migrations"))) continue
      for (const match of fs.readFileSync(file, "utf8").matchAll(WRITE)) found.push(`${relative}: ${match[0]}`)
    }
    assert.deepStrictEqual(found, [])
  })

  it("the check sees a write, and not a table whose name only starts alike", () => {
    assert.lengthOf([..."  INSERT INTO events (id) VALUES (1)".matchAll(WRITE)], 1)
    assert.lengthOf([..."UPDATE event_dispatch c SET".matchAll(WRITE)], 1)
    assert.lengthOf([..."DELETE FROM events WHERE".matchAll(WRITE)], 1)
    assert.lengthOf([..."INSERT INTO session_events (id)".matchAll(WRITE)], 0)
  })
})
