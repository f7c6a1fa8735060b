/**
 * One clock per instant, in the whole service: time comes from Effect's
 * `Clock` (so tests can run it on `TestClock`), and the database computes
 * what it compares with its `now()`. `Date.now()` stays only where code must
 * read the time synchronously outside any Effect, each such file listed
 * below with why, and with how many reads it holds: a new one anywhere in
 * src/, allowed file included, fails here.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const src = path.join(import.meta.dirname, "../../../src")
/** The receiver kit, named `receiver/...` below (its sources and its portable suite). */
const receiver = path.join(import.meta.dirname, "../../../packages/receiver")

/** The sources: build output (the receiver kit's `dist/`, made by its own tests) is not. */
const filesOf = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? entry.name === "dist" ? [] : filesOf(path.join(dir, entry.name))
      : entry.name.endsWith(".ts")
      ? [path.join(dir, entry.name)]
      : []
  )

const DATE_NOW = /\bDate\.now\(/g

/** Files that may read `Date.now()`, how many times (comments included), and why. */
const ALLOWED: Readonly<Record<string, { readonly reads: number; readonly why: string }>> = {
  "platform/Ids.ts": {
    reads: 1,
    why: "ids are made synchronously, often outside any Effect; the instant only orders them"
  },
  "receiver/src/verify.ts": {
    reads: 1,
    why: "the receiver kit runs in the receiver's process without Effect; its documented default clock"
  },
  "receiver/src/events.ts": {
    reads: 1,
    why: "the documentation of that default clock (the `now` option)"
  },
  "receiver/test/harness.ts": {
    reads: 1,
    why: "the receiver kit's dependency-free harness, timing durations where `performance` is missing"
  }
}

/** `file: count` for each file of src/ (and of the receiver kit) that reads `Date.now()`. */
const reads = (): Record<string, number> => {
  const found: Record<string, number> = {}
  const sources = [
    ...filesOf(src).map((file) => [file, path.relative(src, file)]),
    ...filesOf(receiver).map((file) => [file, path.join("receiver", path.relative(receiver, file))])
  ]
  for (const [file, name] of sources) {
    const count = [...fs.readFileSync(file!, "utf8").matchAll(DATE_NOW)].length
    if (count > 0) found[name!.split(path.sep).join("/")] = count
  }
  return found
}

/** What reads more than the allow-list lets it. */
const overAllowance = (found: Record<string, number>) =>
  Object.entries(found)
    .filter(([file, count]) => count > (ALLOWED[file]?.reads ?? 0))
    .map(([file, count]) => `${file}: ${count} Date.now( (allowed ${ALLOWED[file]?.reads ?? 0})`)

describe("the service's clock", () => {
  it("no Date.now( in src/ outside the allow-list, and no more there than it allows", () => {
    assert.deepStrictEqual(overAllowance(reads()), [])
  })

  it("the allow-list names only files that still read it, each with a reason", () => {
    const found = reads()
    for (const [file, { why }] of Object.entries(ALLOWED)) {
      assert.isAbove(found[file] ?? 0, 0, `${file} no longer reads Date.now(: take it off the list`)
      assert.isNotEmpty(why)
    }
  })

  it("the check sees a new read, in a new file or an allowed one", () => {
    assert.deepStrictEqual(overAllowance({ "telemetry/Export.ts": 1 }), [
      "telemetry/Export.ts: 1 Date.now( (allowed 0)"
    ])
    assert.deepStrictEqual(overAllowance({ "platform/Ids.ts": 2 }), ["platform/Ids.ts: 2 Date.now( (allowed 1)"])
    assert.deepStrictEqual(overAllowance({ "platform/Ids.ts": 1 }), [])
  })
})
