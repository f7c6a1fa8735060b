/**
 * Span names follow `Service.method`: the service is a `Context.Service`
 * class of the file that opens the span (or, for a module-level function,
 * the module's file name), and the method is a lower-camel identifier. An
 * operator reading a trace can then find the code from the name alone.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const src = path.join(import.meta.dirname, "../../../src")

const filesOf = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? filesOf(path.join(dir, entry.name))
      : entry.name.endsWith(".ts")
      ? [path.join(dir, entry.name)]
      : []
  )

const SPAN = /(?:Effect\.fn|Effect\.withSpan|Effect\.makeSpan|Effect\.useSpan)\(\s*"([^"]+)"/g
const SERVICE = /class (\w+) extends Context\.Service</g

describe("span names", () => {
  it("every span opened in src is named Service.method after the service (or module) that opens it", () => {
    const drifted: Array<string> = []
    let seen = 0
    for (const file of filesOf(src)) {
      const text = fs.readFileSync(file, "utf8")
      const owners = new Set([path.basename(file, ".ts"), ...[...text.matchAll(SERVICE)].map((m) => m[1]!)])
      for (const match of text.matchAll(SPAN)) {
        seen++
        const [service, method, ...rest] = match[1]!.split(".")
        if (rest.length > 0 || !owners.has(service!) || !/^[a-z][A-Za-z0-9]*$/.test(method ?? "")) {
          drifted.push(`${path.relative(src, file)}: ${match[1]} (expected one of ${[...owners].join(", ")}.method)`)
        }
      }
    }
    assert.isAbove(seen, 50, "the scan finds the spans")
    assert.deepStrictEqual(drifted, [])
  })
})
