/**
 * `npm run bench [-- name ...]`: runs every scenario in bench/scenarios (or
 * the named ones) in turn and prints each one's table. A scenario measures
 * `svc` side by side with a baseline in the same run; figures are never
 * asserted, only reported.
 */
import { readdirSync } from "node:fs"
import { fileURLToPath } from "node:url"
import * as path from "node:path"

export interface ScenarioResult {
  readonly name: string
  /** Rows of the printed table: one per variant (svc, baseline, ...). */
  readonly rows: ReadonlyArray<Record<string, string | number>>
  readonly notes?: ReadonlyArray<string>
}

export type Scenario = () => Promise<ScenarioResult>

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), "scenarios")
const wanted = new Set(process.argv.slice(2))
const files = readdirSync(dir).filter((file) => file.endsWith(".ts")).sort()

for (const file of files) {
  const name = file.replace(/\.ts$/, "")
  if (wanted.size > 0 && !wanted.has(name)) continue
  const scenario = (await import(path.join(dir, file))).default as Scenario
  console.log(`\n== ${name}`)
  const result = await scenario()
  console.table(result.rows)
  for (const note of result.notes ?? []) console.log(`  ${note}`)
}
