/**
 * A worker thread is a V8 isolate of its own: whatever its entry module
 * reaches is loaded and compiled again in every worker, at every start.
 * Effect is the largest of it (about 0.3 CPU-s per worker), and no worker
 * needs it: the workers answer plain messages. So the modules a worker's
 * entry reaches through static value imports never import `effect` (type
 * imports cost nothing at run time).
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const src = path.join(import.meta.dirname, "../../../src")

/**
 * Every worker's entry module (the files `new Worker`, `startWorker` and the
 * forker are given, the forker's own) and what a worker imports when first
 * needed (`rule-worker.ts`: the response scrubber).
 */
const ENTRIES = [
  "approvals/rule-worker.ts",
  "feedback/correction-worker.ts",
  "tasks/validation-worker.ts",
  "database/embedded/embedded-worker.ts",
  "platform/compile-cached.ts",
  "platform/process-forker.ts",
  "approvals/ResponseScrub.ts"
]

const reached = (entry: string): Set<string> => {
  const seen = new Set<string>()
  const visit = (file: string) => {
    if (seen.has(file)) return
    seen.add(file)
    for (
      const match of fs.readFileSync(file, "utf8").matchAll(
        /^(?:import|export) (?!type )[^;"]*?from "(\.\.?\/[^"]+)"/gms
      )
    ) {
      visit(path.resolve(path.dirname(file), match[1]!))
    }
  }
  visit(entry)
  return seen
}

describe("a worker thread's modules", () => {
  it.each(ENTRIES)("%s loads no Effect", (entry) => {
    const offenders: Array<string> = []
    for (const file of reached(path.join(src, entry))) {
      for (
        const match of fs.readFileSync(file, "utf8").matchAll(/^(?:import|export) (?!type )[^;"]*?from "([^"]+)"/gms)
      ) {
        if (match[1] === "effect" || match[1]!.startsWith("effect/") || match[1]!.startsWith("@effect/")) {
          offenders.push(`${path.relative(src, file)}: ${match[1]}`)
        }
      }
    }
    assert.deepStrictEqual(offenders, [])
  })
})
