/**
 * No import cycle between files under src: a file can be read, and its
 * tests written, from the files it imports, without the ones that import
 * it. Type-only imports count (they couple the code as much), as do
 * re-exports.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const src = path.join(import.meta.dirname, "../../../src")

const filesOf = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? filesOf(path.join(dir, entry.name))
      : /\.tsx?$/.test(entry.name)
      ? [path.join(dir, entry.name)]
      : []
  )

const IMPORT = /(?:from|import)\s*\(?\s*"(\.\.?\/[^"]+)"/g

/** file -> the files under src it imports (paths relative to src). */
const fileGraph = () => {
  const graph = new Map<string, Set<string>>()
  for (const file of filesOf(src)) {
    const edges = new Set<string>()
    for (const match of fs.readFileSync(file, "utf8").matchAll(IMPORT)) {
      const target = path.resolve(path.dirname(file), match[1]!)
      if (target.startsWith(src) && fs.existsSync(target)) edges.add(path.relative(src, target))
    }
    graph.set(path.relative(src, file), edges)
  }
  return graph
}

/** The groups of files that import each other, directly or through others (Tarjan's strongly connected components). */
export const cycles = (graph: ReadonlyMap<string, ReadonlySet<string>>): Array<Array<string>> => {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const found: Array<Array<string>> = []
  const visit = (node: string) => {
    index.set(node, index.size)
    low.set(node, index.get(node)!)
    stack.push(node)
    onStack.add(node)
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next)
        low.set(node, Math.min(low.get(node)!, low.get(next)!))
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!))
      }
    }
    if (low.get(node) === index.get(node)) {
      const group: Array<string> = []
      let member: string
      do {
        member = stack.pop()!
        onStack.delete(member)
        group.push(member)
      } while (member !== node)
      if (group.length > 1 || graph.get(node)?.has(node)) found.push(group.sort())
    }
  }
  for (const node of graph.keys()) if (!index.has(node)) visit(node)
  return found
}

/**
 * Cycles of type-only imports that are tolerated until they are broken: the
 * API's examples typed by the groups that show them, and the embedded
 * database's protocol and prepared statements. The list must match what is
 * found exactly, so a new cycle, a grown one, or one broken and left
 * listed all fail.
 */
const TOLERATED = [
  ["api/Agents.ts", "api/Approvals.ts", "api/Console.ts", "api/Examples.ts", "api/Feedback.ts", "api/Notifications.ts", "api/Tasks.ts", "api/Telemetry.ts"],
  ["platform/EmbeddedPrepared.ts", "platform/EmbeddedProtocol.ts"]
]

describe("file structure", () => {
  it("no file under src imports, directly or through others, a file that imports it (beyond the tolerated type-only cycles)", () => {
    const key = (group: ReadonlyArray<string>) => group.join(" ")
    assert.deepStrictEqual(cycles(fileGraph()).map(key).sort(), TOLERATED.map(key).sort())
  })

  it("the delivery engine's folders are in no cycle at all", () => {
    const engine = cycles(fileGraph()).flat().filter((file) => /^(deliveries|notifications|outbound)\//.test(file))
    assert.deepStrictEqual(engine, [])
  })

  it("the check sees a cycle when there is one, and none in a chain", () => {
    const cyclic = new Map([["a.ts", new Set(["b.ts"])], ["b.ts", new Set(["c.ts"])], ["c.ts", new Set(["a.ts"])], ["d.ts", new Set(["a.ts"])]])
    assert.deepStrictEqual(cycles(cyclic), [["a.ts", "b.ts", "c.ts"]])
    const chain = new Map([["a.ts", new Set(["b.ts"])], ["b.ts", new Set(["c.ts"])], ["c.ts", new Set<string>()]])
    assert.deepStrictEqual(cycles(chain), [])
  })
})
