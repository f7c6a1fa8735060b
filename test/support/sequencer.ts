/**
 * The order files start in: the workers take the next file from one
 * queue, so a long file started last keeps one worker busy after the others
 * has finished. Vitest runs the longest first when it has the durations of
 * an earlier run (node_modules/.vite); without them (a new checkout, as in
 * CI) it runs the largest files first, which put short files that start
 * processes or a browser (the CLI example, the liveness test) at the very
 * end. Then `firstRunOrder` instead: files that start `svc` processes or a
 * browser first, then the other integration files, then the rest, each
 * group largest first.
 */
import * as fs from "node:fs"
import { BaseSequencer, type TestSpecification } from "vitest/node"

/** 0: starts processes or a browser; 1: other integration files; 2: the rest. */
export const weightOf = (file: string): number => {
  if (file.includes("/test/browser/")) return 0
  const text = fs.readFileSync(file, "utf8")
  if (text.includes("support/process.ts") || text.includes("node:child_process")) return 0
  return file.includes("/test/integration/") ? 1 : 2
}

/** Absolute paths of test files in the order a run without earlier durations starts them. */
export const firstRunOrder = (files: ReadonlyArray<string>): Array<string> =>
  files
    .map((file) => ({ file, weight: weightOf(file), size: fs.statSync(file).size }))
    .sort((a, b) => a.weight - b.weight || b.size - a.size)
    .map((entry) => entry.file)

export class SlowFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    if (files.every((spec) => this.ctx.cache.getTestSpecificationResult(spec) !== undefined)) return super.sort(files)
    const byFile = new Map(files.map((spec) => [spec.moduleId, spec]))
    return firstRunOrder([...byFile.keys()]).map((file) => byFile.get(file)!)
  }
}
