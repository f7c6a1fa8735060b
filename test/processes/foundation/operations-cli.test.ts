/**
 * The CLI example of docs/operations.md ("The CLI") runs as a reader runs
 * it: in bash, from the repository, on a new embedded data folder (its
 * database migrated beforehand, from the run's snapshot), each command in
 * turn with the variables the earlier ones set; what its `# {…}` lines say
 * a command prints is there. Its only change: `svc.sql` is written into the
 * test's own folder.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { onServerRun } from "../../support/databases.ts"
import { root, seededDataDir } from "../../support/process.ts"
import { blocksRun } from "../../support/run-blocks.ts"

/** `"key":value` pairs a `# {…}` line promises (those without `…`). */
const promisedPairs = (comment: string): Array<string> =>
  [...comment.matchAll(/"[a-z_]+":(?:"[^"…]*"|-?\d+|true|false|null)(?=[,}\]])/g)].map((match) => match[0])

const jq = spawnSync("jq", ["--version"]).status === 0

describe.skipIf(onServerRun)("the CLI example of docs/operations.md", () => {
  // Without jq a developer's run skips this with a warning; CI fails (.ci/run installs it).
  if (!jq && process.env.CI === undefined) {
    console.warn("\n*** SKIPPED the CLI example of docs/operations.md: install jq ***\n")
  }
  it.skipIf(!jq && process.env.CI === undefined)("runs, command by command, and prints what it says", () => {
    const blocks = blocksRun("docs/operations.md", "The CLI")
    assert.lengthOf(blocks, 1)
    const work = fs.mkdtempSync(path.join(os.tmpdir(), "svc-ops-cli-"))
    try {
      const env: Record<string, string> = {}
      for (const [key, value] of Object.entries(process.env)) {
        if (value !== undefined && !key.startsWith("npm_")) env[key] = value
      }
      Object.assign(env, { NO_COLOR: "1", DATABASE_URL: "", SVC_DATA_DIR: seededDataDir("svc-ops-cli-data-") })
      const lines = blocks[0]!.code.split("\n")
      const commands = lines.filter((line) => line.trim() !== "" && !line.startsWith("#"))
      const state = path.join(work, "state.sh")
      fs.writeFileSync(state, "")
      for (const [i, command] of commands.entries()) {
        const script = `set -a; . '${state}'; set -eo pipefail\n${
          command.replace("> svc.sql", `> '${work}/svc.sql'`)
        }\nexport -p > '${state}'`
        const ran = spawnSync("bash", ["-c", script], { cwd: root, env, encoding: "utf8", timeout: 120_000 })
        assert.strictEqual(ran.status, 0, `${command}\n${ran.stdout}${ran.stderr}`)
        // The `# {…}` line right after a command is what it prints.
        const next = lines[lines.indexOf(command) + 1]
        if (next?.startsWith("# {")) {
          for (const pair of promisedPairs(next)) assert.include(ran.stdout, pair, `${command}: promised ${next}`)
        }
        if (i === 0) assert.match(fs.readFileSync(state, "utf8"), /declare -x ORG="[0-9a-f-]{36}"/)
      }
      const dump = fs.readFileSync(path.join(work, "svc.sql"), "utf8")
      assert.include(dump, "COPY")
      assert.include(dump, "api_keys")
    } finally {
      fs.rmSync(work, { recursive: true, force: true })
    }
  }, 300_000)

  it("the promises are read as the README's are", () => {
    assert.deepStrictEqual(promisedPairs("{\"rows\":[{\"keys\":\"1\"}]}"), ["\"keys\":\"1\""])
    assert.deepStrictEqual(promisedPairs("{\"id\":\"…\",\"deleted\":true,\"keys\":1}"), [
      "\"deleted\":true",
      "\"keys\":1"
    ])
  })
})
