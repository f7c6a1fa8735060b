/**
 * The benchmark's pages stay true without running the benchmark (which never
 * runs in `npm test`): every command on docs/performance.md and
 * bench/README.md names a scenario `bench/run.ts` knows, a variable the
 * harness reads, a script that exists and flags that script takes; the
 * performance page's commands are marked illustrative (they run for
 * minutes); and the measurement notes in bench/notes/ are indexed from
 * bench/README.md, with links that resolve.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { codeBlocks, deadLink, linksOf, read, readRepositoryPath } from "../../support/markdown.ts"
import { root } from "../../support/process.ts"

const PAGES = ["docs/performance.md", "bench/README.md"]
export const PERFORMANCE_MAX_LINES = 200

const filesUnder = (dir: string): Array<string> =>
  fs.readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(`${dir}/${entry.name}`) : [`${dir}/${entry.name}`]
  )

/** The scenario names `bench/run.ts` accepts: its default ones and the in-process ones. */
export const knownScenarios = (runTs: string): Set<string> => {
  const names = (list: string) =>
    [...(new RegExp(String.raw`const ${list} = \[([^\]]*)\]`).exec(runTs)?.[1] ?? "").matchAll(/"([\w-]+)"/g)].map((
      m
    ) => m[1]!)
  return new Set([...names("SCENARIOS"), ...names("INPROCESS")])
}

/** Environment variables the benchmark's code reads (`process.env.X` in TypeScript, `$X` or `${X` in shell). */
export const readVariables = (sources: ReadonlyArray<string>): Set<string> =>
  new Set(
    sources.flatMap((text) =>
      [...text.matchAll(/process\.env\.([A-Z_][A-Z0-9_]*)|\$\{?([A-Z_][A-Z0-9_]*)/g)].map((m) => (m[1] ?? m[2])!)
    )
  )

interface Harness {
  readonly scenarios: ReadonlySet<string>
  readonly variables: ReadonlySet<string>
  /** A repository file's text, or undefined. */
  readonly file: (name: string) => string | undefined
}

/** The shell commands of a block, continuation lines joined, comments and `...` elisions left out. */
const commandsOf = (code: string): Array<string> =>
  code.replace(/\\\n/g, " ").split(/\n|&&|;/).map((line) => line.replace(/(^|\s)#.*$/, "").trim())
    .filter((line) => line.length > 0 && !line.startsWith("..."))

/** Why a command of the pages is not a valid invocation of the benchmark, or nothing. */
export const commandProblems = (command: string, harness: Harness): Array<string> => {
  const words = command.replace(/\(|\)/g, " ").split(/\s+/).filter((w) => w.length > 0)
  const problems: Array<string> = []
  let i = 0
  for (; i < words.length && /^[A-Z_][A-Z0-9_]*=/.test(words[i]!); i++) {
    const name = words[i]!.split("=")[0]!
    if (!harness.variables.has(name)) problems.push(`${name} is read nowhere in bench/`)
  }
  const rest = words.slice(i)
  if (rest[0] === "npm" && rest[1] === "run" && rest[2] === "bench") {
    const dashes = rest.indexOf("--")
    for (const name of dashes === -1 ? [] : rest.slice(dashes + 1)) {
      if (!harness.scenarios.has(name)) problems.push(`bench/run.ts knows no scenario ${name}`)
    }
    return problems
  }
  const script = rest.find((w) => /^bench\/\S+\.(?:ts|sh)$/.test(w))
  if (script === undefined) return problems
  const text = harness.file(script)
  if (text === undefined) return [...problems, `${script} does not exist`]
  for (const flag of rest.filter((w) => /^--[a-z][\w-]*$/.test(w))) {
    const name = flag.slice(2)
    if (!text.includes(`"${name}"`) && !text.includes(`--${name}`)) problems.push(`${script} takes no ${flag}`)
  }
  return problems
}

const harness = (): Harness => {
  const sources = filesUnder("bench").filter((f) => /\.(?:ts|sh)$/.test(f)).map((f) => read(f))
  return {
    scenarios: knownScenarios(read("bench/run.ts")),
    variables: readVariables(sources),
    file: (name) => (fs.existsSync(path.join(root, name)) ? read(name) : undefined)
  }
}

describe("the benchmark's pages", () => {
  it("every command names a scenario bench/run.ts knows, a variable the harness reads, a script that exists and its flags", () => {
    const h = harness()
    assert.includeMembers([...h.scenarios], ["writes", "steps", "webhooks", "metrics"])
    const commands = PAGES.flatMap((page) =>
      codeBlocks(page, read(page)).filter((block) => block.lang === "sh").flatMap((block) =>
        commandsOf(block.code).map((command) => ({ page, line: block.line, command }))
      )
    )
    assert.isAbove(commands.filter((c) => c.command.includes("npm run bench")).length, 5)
    const problems = commands.flatMap(({ page, line, command }) =>
      commandProblems(command, h).map((problem) => `${page}:${line}: ${problem}`)
    )
    assert.deepStrictEqual(problems, [])
  })

  it("the check catches an unknown scenario, an unread variable, a missing script and an unknown flag", () => {
    const h: Harness = {
      scenarios: new Set(["writes"]),
      variables: new Set(["BENCH_QUICK"]),
      file: (name) => (name === "bench/faults.ts" ? "arg(\"events\")" : undefined)
    }
    assert.deepStrictEqual(commandProblems("BENCH_QUICK=1 npm run bench -- writes", h), [])
    assert.deepStrictEqual(commandProblems("npx node bench/faults.ts --events 3000", h), [])
    assert.lengthOf(commandProblems("BENCH_QUIK=1 npm run bench -- writes wirtes", h), 2)
    assert.lengthOf(commandProblems("npx node bench/gone.ts", h), 1)
    assert.lengthOf(commandProblems("npx node bench/faults.ts --evnets 3", h), 1)
  })

  it("the performance page is a reader's page: its commands are marked illustrative, and it stays short", () => {
    const text = read("docs/performance.md")
    const blocks = codeBlocks("docs/performance.md", text)
    assert.isAbove(blocks.length, 0)
    assert.deepStrictEqual(
      blocks.filter((block) => !block.flags.includes("illustrative")).map((block) =>
        `docs/performance.md:${block.line}`
      ),
      []
    )
    assert.isAtMost(text.split("\n").length, PERFORMANCE_MAX_LINES)
  })

  it("every measurement note is indexed from bench/README.md and its links resolve", () => {
    const notes = fs.readdirSync(path.join(root, "bench/notes")).filter((name) => name.endsWith(".md")).map((name) =>
      `bench/notes/${name}`
    )
    assert.isAbove(notes.length, 3)
    const indexed = new Set(
      linksOf("bench/README.md", read("bench/README.md")).map((link) =>
        path.posix.join("bench", link.target.split("#")[0]!)
      )
    )
    assert.deepStrictEqual(notes.filter((note) => !indexed.has(note)), [])
    const dead = notes.flatMap((note) => linksOf(note, read(note))).flatMap((link) => {
      const reason = deadLink(link, readRepositoryPath)
      return reason === undefined ? [] : [`${link.page}:${link.line}: ${reason}`]
    })
    assert.deepStrictEqual(dead, [])
  })
})
