/**
 * Each capability is a folder, and folders depend on each other in one
 * direction: no chain of imports leads from a folder back to itself. A
 * cycle means two capabilities cannot be read, changed or tested apart.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const src = path.join(import.meta.dirname, "../../../src")

const filesOf = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? filesOf(path.join(dir, entry.name))
      : entry.name.endsWith(".ts")
      ? [path.join(dir, entry.name)]
      : []
  )

/**
 * folder -> the folders its files import: static, type-only (they couple the
 * code as much) and dynamic (`import("...")`, loaded later but still a
 * dependency).
 */
const folderGraph = () => {
  const graph = new Map<string, Set<string>>()
  for (const file of filesOf(src)) {
    const folder = path.relative(src, file).split(path.sep)[0]!
    if (!fs.statSync(path.join(src, folder)).isDirectory()) continue
    const edges = graph.get(folder) ?? new Set<string>()
    graph.set(folder, edges)
    for (const match of fs.readFileSync(file, "utf8").matchAll(/(?:from |import\()"(\.\.?\/[^"]+)"/g)) {
      const target = path.relative(src, path.resolve(path.dirname(file), match[1]!)).split(path.sep)[0]!
      if (
        target !== folder && fs.existsSync(path.join(src, target)) && fs.statSync(path.join(src, target)).isDirectory()
      ) edges.add(target)
    }
  }
  return graph
}

const cycles = (graph: Map<string, Set<string>>) => {
  const found: Array<string> = []
  const visit = (node: string, trail: Array<string>) => {
    for (const next of graph.get(node) ?? []) {
      const at = trail.indexOf(next)
      if (at >= 0) found.push([...trail.slice(at), next].join(" -> "))
      else visit(next, [...trail, next])
    }
  }
  for (const node of graph.keys()) visit(node, [node])
  return [...new Set(found)]
}

describe("folder structure", () => {
  it("no folder under src imports, directly or through others, a folder that imports it", () => {
    assert.deepStrictEqual(cycles(folderGraph()), [])
  })

  it("the check sees a cycle when there is one", () => {
    const graph = new Map([["a", new Set(["b"])], ["b", new Set(["c"])], ["c", new Set(["a"])]])
    assert.isNotEmpty(cycles(graph))
  })
})
