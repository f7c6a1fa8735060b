/**
 * The delivery queue (`src/deliveries`) is the only code that writes the
 * queue's tables: every rule about a delivery's life (leases, the capacity
 * rule, the undelivered count, cooldowns) is then read in one folder.
 * Capabilities read them (listings, metrics) and call the queue to change
 * them. Migrations (the tables' definitions and triggers) are the exception.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const src = path.join(import.meta.dirname, "../../../src")

const filesOf = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesOf(path.join(dir, entry.name)) : entry.name.endsWith(".ts") ? [path.join(dir, entry.name)] : []
  )

const WRITE = /\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(deliveries|delivery_attempts|delivery_targets)\b/gi

describe("the delivery queue owns its tables", () => {
  it("no statement outside src/deliveries (and the migrations) writes deliveries, delivery_attempts or delivery_targets", () => {
    const found: Array<string> = []
    for (const file of filesOf(src)) {
      const relative = path.relative(src, file)
      if (relative.startsWith(`deliveries${path.sep}`) || relative.startsWith(path.join("database", "migrations"))) continue
      for (const match of fs.readFileSync(file, "utf8").matchAll(WRITE)) found.push(`${relative}: ${match[0]}`)
    }
    assert.deepStrictEqual(found, [])
  })

  it("the check sees a write", () => {
    assert.isTrue([..."  INSERT INTO deliveries (id) VALUES (1)".matchAll(WRITE)].length === 1)
    assert.isTrue([..."DELETE FROM delivery_attempts WHERE".matchAll(WRITE)].length === 1)
    assert.isTrue([..."UPDATE delivery_targets SET".matchAll(WRITE)].length === 1)
  })
})
