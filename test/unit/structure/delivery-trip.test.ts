/**
 * The trip of one webhook delivery hands it between folders a known number
 * of times (docs/architecture.md, "How a delivery travels", its table of
 * hand-offs). Each hand-off is a call: forward when the caller imports the
 * callee's file, back when the callee's file imports the caller's folder
 * and gives it the function (the worker's send). The page states the
 * count; the imports and the functions the sender gives the worker hold
 * it, so a new crossing (another function handed to the worker, a call of
 * `notifications/` from `deliveries/`) fails here until the page says so.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { root } from "../../support/process.ts"

const src = path.join(root, "src")
const page = fs.readFileSync(path.join(root, "docs/architecture.md"), "utf8")
const heading = "### How a delivery travels\n"
const rest = page.slice(page.indexOf(heading) + heading.length)
const section = rest.slice(0, rest.search(/^#{2,3} /m))

interface HandOff {
  readonly row: string
  readonly back: boolean
  readonly caller: string
  readonly callee: string
}

/** The table's rows: `| 4 (back) | \`caller\` | \`callee\` | what |`. */
const handOffs: ReadonlyArray<HandOff> = Array.from(
  section.matchAll(/^\| (\d+)( \(back\))? \| `([^`]+)` \| `([^`]+)` \|/gm),
  (m) => ({ row: m[1]!, back: m[2] !== undefined, caller: m[3]!, callee: m[4]! })
)

const folderOf = (file: string) => file.split("/")[0]!

/** The files `file` (under src/) imports, relative to src/. */
const importsOf = (file: string): ReadonlyArray<string> => {
  const text = fs.readFileSync(path.join(src, file), "utf8")
  return Array.from(
    text.matchAll(/(?:from |import\()"(\.\.?\/[^"]+)"/g),
    (m) => path.relative(src, path.resolve(path.dirname(path.join(src, file)), m[1]!)).split(path.sep).join("/")
  )
}

const filesOf = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? filesOf(path.join(dir, entry.name))
      : entry.name.endsWith(".ts")
      ? [path.join(dir, entry.name)]
      : []
  )

describe("the delivery's trip between folders", () => {
  it("the page counts its hand-offs: as many rows as it says, as many of them back", () => {
    const stated = /hands the delivery from one folder to\s+another (\d+) times, (\d+) of them back/.exec(section)
    assert.isNotNull(stated, "the opening states the count")
    assert.strictEqual(handOffs.length, Number(stated![1]))
    assert.strictEqual(handOffs.filter((h) => h.back).length, Number(stated![2]))
    assert.deepStrictEqual(handOffs.map((h) => h.row), handOffs.map((_, i) => String(i + 1)))
  })

  it("each hand-off crosses folders and is a call the imports allow, in the direction the page says", () => {
    for (const { back, callee, caller, row } of handOffs) {
      assert.isTrue(fs.existsSync(path.join(src, caller)), `${row}: ${caller} exists`)
      assert.isTrue(fs.existsSync(path.join(src, callee)), `${row}: ${callee} exists`)
      assert.notStrictEqual(folderOf(caller), folderOf(callee), `${row}: crosses folders`)
      if (back) {
        // The callee gives the caller's folder the function: it imports it, and the caller imports nothing of the callee's folder.
        assert.isTrue(
          importsOf(callee).some((file) => file.startsWith(path.dirname(caller) + "/")),
          `${row}: ${callee} hands ${caller} its function`
        )
        assert.isFalse(
          importsOf(caller).some((file) => folderOf(file) === folderOf(callee)),
          `${row}: ${caller} imports nothing of ${folderOf(callee)}/`
        )
      } else {
        assert.include(importsOf(caller), callee, `${row}: ${caller} imports ${callee}`)
      }
    }
  })

  it("the sender gives the worker one send per attempt and no other function", () => {
    const sender = fs.readFileSync(path.join(src, "notifications/send/Sender.ts"), "utf8")
    const call = sender.slice(sender.indexOf("yield* runWorker({"))
    const options = call.slice(0, call.indexOf("})"))
    const given = Array.from(options.matchAll(/^\s+(\w+): sender\.\w+/gm), (m) => m[1]!)
    // `handleDirect` is the same send without a fiber of its own: the worker offers each delivery to it first, else to `handle`.
    assert.deepStrictEqual(given.sort(), ["handle", "handleDirect"])
    assert.strictEqual(handOffs.filter((h) => h.back && h.callee === "notifications/send/Sender.ts").length, 1)
  })

  it("nothing in deliveries/ imports notifications/", () => {
    const offending = filesOf(path.join(src, "deliveries"))
      .map((file) => path.relative(src, file).split(path.sep).join("/"))
      .filter((file) => importsOf(file).some((target) => folderOf(target) === "notifications"))
    assert.deepStrictEqual(offending, [])
  })
})
