/**
 * The order files start in: the workers take the next file from one
 * queue, so a long file started last keeps one worker busy after the others
 * have finished. Vitest runs the longest first when it has the durations of
 * an earlier run (node_modules/.vite); a new checkout, as in CI, has none.
 * Then `firstRunOrder` instead: longest first by the durations recorded in
 * `durations.json` beside this file. A file not recorded there is placed by
 * what it does: one that starts `svc` processes or a browser as a long file,
 * another integration file as a middling one, the rest as short ones.
 *
 * Measured on two cores, same checkout, compile caches warm, Vitest's own
 * durations removed as on a new checkout: the whole suite took 321 s in the
 * order of the old rule (processes and browsers first, largest file first)
 * and 289-303 s in the order of recorded durations. After a run, `node test/support/sequencer.ts` records that
 * run's durations again.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { BaseSequencer, type TestSpecification } from "vitest/node"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "../..")
const recordFile = path.join(here, "durations.json")

/** 0: starts processes or a browser; 1: other integration files; 2: the rest. */
export const weightOf = (file: string): number => {
  if (file.includes("/test/browser/")) return 0
  const text = fs.readFileSync(file, "utf8")
  if (text.includes("support/process.ts") || text.includes("node:child_process")) return 0
  return file.includes("/test/integration/") ? 1 : 2
}

/** Seconds a file not in the record is taken to last, by its weight. */
const GUESS = [20, 5, 1] as const

/** Recorded seconds by path from the repository's root. */
export const recorded = (): Record<string, number> => JSON.parse(fs.readFileSync(recordFile, "utf8"))

/** Absolute paths of test files in the order a run without earlier durations starts them. */
export const firstRunOrder = (
  files: ReadonlyArray<string>,
  record: Record<string, number> = recorded()
): Array<string> =>
  files
    .map((file) => ({ file, seconds: record[path.relative(root, file)] ?? GUESS[weightOf(file)]! }))
    .sort((a, b) => b.seconds - a.seconds)
    .map((entry) => entry.file)

export class SlowFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    if (files.every((spec) => this.ctx.cache.getTestSpecificationResult(spec) !== undefined)) return super.sort(files)
    const byFile = new Map(files.map((spec) => [spec.moduleId, spec]))
    return firstRunOrder([...byFile.keys()]).map((file) => byFile.get(file)!)
  }
}

// `node test/support/sequencer.ts`: records the durations of the last run.
if (import.meta.main) {
  const cache = path.join(root, "node_modules/.vite/vitest")
  const record: Record<string, number> = {}
  for (const dir of fs.readdirSync(cache)) {
    const resultsFile = path.join(cache, dir, "results.json")
    if (!fs.existsSync(resultsFile)) continue
    const results = JSON.parse(fs.readFileSync(resultsFile, "utf8"))
    for (const [file, result] of Object.entries<{ duration?: number }>(results.projects[""].files)) {
      if (result.duration !== undefined && file.startsWith("test/")) {
        record[file] = Math.round(result.duration / 100) / 10
      }
    }
  }
  const sorted = Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)))
  fs.writeFileSync(recordFile, `${JSON.stringify(sorted, null, 2)}\n`)
  console.log(`recorded ${Object.keys(sorted).length} files in ${path.relative(root, recordFile)}`)
}
