/**
 * Two limits on src/ that keep it readable and its rows checked:
 *
 * - A row type asserted on the `sql` tag (`sql<Row>`) is a promise the
 *   database can break without a test noticing; rows go through schemas
 *   (`src/platform/Rows.ts`). At most `MAX_ASSERTED` statements in the whole
 *   of src/ keep an asserted type, each for a reason (a hot statement where
 *   decoding would cost) written in a comment on the line above.
 *   Migrations are history, run once, and are not counted.
 * - No source file passes `MAX_LINES` lines: past that a file holds more
 *   than one idea, and splitting it by idea is due. Nor does one come
 *   within `MARGIN` lines of it (none passes `MAX_LINES - MARGIN`): a file
 *   at the cap grows by squeezing, so it is split while there is room.
 * - No two files of src/ import each other, directly or around a loop,
 *   type-only imports included: a loop means neither file can be read
 *   (or moved) without the other.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const src = path.join(import.meta.dirname, "../../../src")

const MAX_ASSERTED = 5
const MAX_LINES = 450
const MARGIN = 50
/** The most lines a source file has: the cap less the room kept under it. */
const MOST_LINES = MAX_LINES - MARGIN

/** The sources, as paths relative to src/: build output (the receiver kit's `dist/`) is not. */
const filesOf = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? entry.name === "dist" ? [] : filesOf(path.join(dir, entry.name))
      : entry.name.endsWith(".ts")
      ? [path.join(dir, entry.name)]
      : []
  )

const sources = (): ReadonlyArray<{ readonly file: string; readonly text: string }> =>
  filesOf(src).map((file) => ({
    file: path.relative(src, file).split(path.sep).join("/"),
    text: fs.readFileSync(file, "utf8")
  }))

const isMigration = (file: string) => file.startsWith("database/migrations/")

const ASSERTED = /\bsql</

/** `file:line` of each row type asserted on the `sql` tag, and whether a comment stands on the line above. */
const assertedRows = (files: ReadonlyArray<{ readonly file: string; readonly text: string }>) =>
  files.filter(({ file }) => !isMigration(file)).flatMap(({ file, text }) => {
    const lines = text.split("\n")
    return lines.flatMap((line, i) => {
      if (!ASSERTED.test(line) || /^\s*(\*|\/\/)/.test(line)) return []
      // The reason stands above the statement, or above the declaration it opens.
      let j = i - 1
      if (/(=>|\()\s*$/.test(lines[j] ?? "")) j--
      const above = (lines[j] ?? "").trim()
      return [{ at: `${file}:${i + 1}`, explained: above.startsWith("//") || above.endsWith("*/") }]
    })
  })

/** What breaks the rules on asserted row types: too many, or one without its reason. */
const assertedProblems = (files: ReadonlyArray<{ readonly file: string; readonly text: string }>) => {
  const found = assertedRows(files)
  return [
    ...(found.length > MAX_ASSERTED
      ? [`${found.length} row types asserted with sql< (at most ${MAX_ASSERTED}): ${found.map((f) => f.at).join(", ")}`]
      : []),
    ...found.filter((f) => !f.explained).map((f) => `${f.at}: sql< without a comment on the line above saying why`)
  ]
}

const overLong = (files: ReadonlyArray<{ readonly file: string; readonly text: string }>) =>
  files
    .map(({ file, text }) => ({ file, lines: text.split("\n").length - (text.endsWith("\n") ? 1 : 0) }))
    .filter(({ lines }) => lines > MOST_LINES)
    .map(({ file, lines }) =>
      `${file}: ${lines} lines; a file keeps ${MARGIN} lines of room under the ${MAX_LINES}-line cap (at most ${MOST_LINES}): split it by idea`
    )

describe("rows are decoded by schemas", () => {
  it(`at most ${MAX_ASSERTED} row types asserted with sql< in src/ (migrations aside), each with a comment above saying why`, () => {
    assert.deepStrictEqual(assertedProblems(sources()), [])
  })

  it("the check sees an asserted type without a reason, and too many with one", () => {
    const bare = { file: "a/A.ts", text: "const x = 1\nconst rows = yield* sql<{ id: string }>`SELECT id FROM t`\n" }
    assert.deepStrictEqual(assertedProblems([bare]), ["a/A.ts:2: sql< without a comment on the line above saying why"])
    const explained = { file: "a/B.ts", text: "// Hot: every POST reads it.\nsql<{ id: string }>`SELECT 1`\n" }
    assert.deepStrictEqual(assertedProblems([explained]), [])
    const six = Array.from({ length: MAX_ASSERTED + 1 }, (_, i) => ({ ...explained, file: `a/F${i}.ts` }))
    assert.strictEqual(assertedProblems(six).length, 1)
    assert.deepStrictEqual(assertedProblems([{ file: "database/migrations/0001_x.ts", text: bare.text }]), [])
  })
})

describe("source files stay small", () => {
  it(`no .ts file in src/ comes within ${MARGIN} lines of the ${MAX_LINES}-line cap (at most ${MOST_LINES})`, () => {
    assert.deepStrictEqual(overLong(sources()), [])
  })

  it("the check sees a file in the margin and one past the cap, and lets one at the margin's edge be", () => {
    const lines = (n: number) => "x\n".repeat(n)
    assert.deepStrictEqual(overLong([{ file: "a/Near.ts", text: lines(MOST_LINES + 1) }]), [
      `a/Near.ts: ${
        MOST_LINES + 1
      } lines; a file keeps ${MARGIN} lines of room under the ${MAX_LINES}-line cap (at most ${MOST_LINES}): split it by idea`
    ])
    assert.strictEqual(overLong([{ file: "a/Long.ts", text: lines(MAX_LINES + 1) }]).length, 1)
    assert.deepStrictEqual(overLong([{ file: "a/Ok.ts", text: lines(MOST_LINES) }]), [])
    assert.strictEqual(MOST_LINES, 400)
  })
})

const IMPORT = /^(?:import|export)\s[^"']*?from\s+["'](\.{1,2}\/[^"']+)["']/gm

/** The import loops among `files` (each as its files, sorted), by Tarjan's strongly connected components. */
const importLoops = (files: ReadonlyArray<{ readonly file: string; readonly text: string }>) => {
  const known = new Set(files.map((f) => f.file))
  const edges = new Map(files.map(({ file, text }) => [
    file,
    [...text.matchAll(IMPORT)].map((m) => path.posix.normalize(path.posix.join(path.posix.dirname(file), m[1]!)))
      .filter((to) => known.has(to))
  ]))
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const loops: Array<Array<string>> = []
  const visit = (v: string) => {
    index.set(v, index.size)
    low.set(v, index.get(v)!)
    stack.push(v)
    for (const w of edges.get(v)!) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (stack.includes(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) === index.get(v)) {
      const loop = stack.splice(stack.indexOf(v))
      if (loop.length > 1) loops.push(loop.sort())
    }
  }
  for (const { file } of files) if (!index.has(file)) visit(file)
  return loops.map((loop) => loop.join(" <-> "))
}

describe("imports", () => {
  it("no import loop between files of src/", () => {
    assert.deepStrictEqual(importLoops(sources()), [])
  })

  it("the check sees a loop, type-only imports and re-exports included, and not a chain", () => {
    const file = (name: string, text: string) => ({ file: name, text })
    assert.deepStrictEqual(
      importLoops([
        file("a/A.ts", `import { b } from "./B.ts"\n`),
        file("a/B.ts", `import type { C } from "../c/C.ts"\n`),
        file("c/C.ts", `export { a } from "../a/A.ts"\n`)
      ]),
      ["a/A.ts <-> a/B.ts <-> c/C.ts"]
    )
    assert.deepStrictEqual(importLoops([file("a/A.ts", `import { b } from "./B.ts"\n`), file("a/B.ts", "")]), [])
  })
})
