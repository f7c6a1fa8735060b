/**
 * The product speaks of itself alone. Readers of the pages and of the code
 * cannot see the tracker, nor who built or measured what, so no page, code
 * comment, test name or log line points there ("issue 11, item 8", "rule
 * 4", "this stop", "while helpers shared the machine"): it says the rule
 * itself. Dates and commit ids are fine where a figure needs them; commit
 * messages may cite the tracker.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { root } from "../../support/process.ts"

const NUMBERS = String.raw`\d+(?:\s*(?:[-–,]|and)\s*\d+)*`

/** What points at the tracker or at who did the work, each with what it is. */
export const RULES: ReadonlyArray<readonly [string, RegExp]> = [
  ["an issue number", /\bissues?\s*#?\d+/i],
  ["a numbered item, rule or stop of an issue", new RegExp(String.raw`\b(?:items?|rules?|stops?)\s+${NUMBERS}\b`, "i")],
  [
    "a stop of the work",
    /\b(?:this|that|the first|the last|the previous|the next|an earlier|a later)\s+stop(?:'s)?\b(?!\s+(?:signal|button|the|it|them|when|if|and))/i
  ],
  [
    "the issue as an authority",
    /\b(?:this issue|the (?:\w+ )?issue's|aims? of the (?:\w+ )?issue|the (?:performance|console|telemetry|webhooks?|receiver|approvals?|feedback|operators?|docs|hardening|scaling) issue)\b/i
  ],
  [
    "who did the work",
    /\b(?:while helpers|other helpers|the helpers|a helper's|helpers? (?:shared|ran|worked|built|measured|landed))\b/i
  ],
  ["the coordinator", /\bthe coordinator\b/i]
]

/** The findings in one text, as `file:line: what — the words`. */
export const findings = (file: string, text: string): Array<string> =>
  text.split("\n").flatMap((line, i) =>
    RULES.flatMap(([what, pattern]) => {
      const match = pattern.exec(line)
      return match === null ? [] : [`${file}:${i + 1}: ${what} — "${match[0]}"`]
    })
  )

const SKIPPED_FOLDERS = new Set(["node_modules", "dist", ".data", "bench-results", "browser-screenshots"])
const TEXT = /\.(?:ts|tsx|js|mjs|md|json|sql|sh|css|html|yaml|yml|nix)$/

const filesUnder = (dir: string): Array<string> =>
  !fs.existsSync(path.join(root, dir)) ? [] : fs.statSync(path.join(root, dir)).isFile() ?
    [dir] :
    fs.readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((entry) =>
      SKIPPED_FOLDERS.has(entry.name) ?
        [] :
        entry.isDirectory() ?
        filesUnder(`${dir}/${entry.name}`) :
        TEXT.test(entry.name)
        ? [`${dir}/${entry.name}`]
        : []
    )

/** This file names what it looks for. */
const SELF = "test/unit/docs/self-reference.test.ts"

describe("the product speaks of itself alone", () => {
  it("no page, code comment, test name or log line in the repository points at the tracker or at who did the work", () => {
    const files = [
      "README.md",
      "CHANGELOG.md",
      "docs",
      "src",
      "test",
      "bench",
      "scripts",
      "tools/cli",
      "console/src",
      ".ci",
      "flake.nix",
      "package.json"
    ]
      .flatMap(filesUnder)
      .filter((file) => file !== SELF)
    assert.isAbove(files.length, 200)
    const found = files.flatMap((file) => findings(file, fs.readFileSync(path.join(root, file), "utf8")))
    assert.deepStrictEqual(found, [], "say the rule itself instead")
  })

  it("the check finds references to the tracker and to who did the work", () => {
    const planted = [
      "// The list says when the cooldown ends (issue 11, item 9).",
      " * Issue 4, rules 1-6: policies",
      "describe(\"item 3: a sign-in link works once\", () => {",
      "describe(\"signed POSTs (rule 4)\", () => {",
      "with this stop's work (01583aa)",
      "the first stop's work on it",
      "While helpers shared the machine, one checkout's p99 moved",
      "a helper's tests ran beside it",
      "| `SVC_X` | see issue #12 | |",
      "the fair benchmark of the performance issue: svc against",
      "// The issue's promise: no correction waits",
      "stop 3 made it faster",
      "the coordinator merges it"
    ]
    for (const line of planted) assert.isNotEmpty(findings("planted.ts", line), line)
  })

  it("the check leaves ordinary words alone", () => {
    const ordinary = [
      "/** Raw HTTP helpers for tests that must see the wire. */",
      "The benchmark's shared helpers (not the benchmark itself)",
      "`V8Worker`: V8's helpers, mostly garbage collection",
      "a cursor we did not issue is 400 naming the cursor",
      "formatIssues(error.cause.issue).issues.map((issue) => ({",
      "`npm run cli -- <command>`: issue organizations and API keys.",
      "It also scrubs the issue lists answered about a correction",
      "At SIGTERM, open streams end; this stop signal drains the server",
      "at most 100 items per page; 2 items remain",
      "the first 3 rules of the ruleset",
      "This step_id was already sent in this session with another tool",
      "p99 within 5 % at 2026-11-23, commit 995284a"
    ]
    for (const line of ordinary) assert.deepStrictEqual(findings("ordinary.ts", line), [], line)
  })
})
