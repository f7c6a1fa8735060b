/**
 * The contract stands apart from the server: `@svc/client` (and everything in
 * src/api) must load without any server-side module, so the typed client can
 * be used anywhere `fetch` runs.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const src = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../src")

const localImports = (file: string): Array<string> => {
  const text = fs.readFileSync(file, "utf8")
  const found: Array<string> = []
  for (const match of text.matchAll(/(?:import|export)\s[^"']*?from\s+["'](\.{1,2}\/[^"']+)["']/g)) {
    found.push(path.resolve(path.dirname(file), match[1]!))
  }
  return found
}

const closure = (entry: string) => {
  const seen = new Set<string>()
  const visit = (file: string) => {
    if (seen.has(file)) return
    seen.add(file)
    for (const next of localImports(file)) visit(next)
  }
  visit(entry)
  return [...seen].map((file) => path.relative(src, file))
}

describe("the API contract is importable without server code", () => {
  it("@svc/client reaches only src/api and itself", () => {
    for (const file of closure(path.join(src, "client.ts"))) {
      assert.isTrue(file === "client.ts" || file.startsWith("api/"), `client imports ${file}`)
    }
  })

  it("every module in src/api imports only src/api", () => {
    for (const name of fs.readdirSync(path.join(src, "api"))) {
      for (const file of closure(path.join(src, "api", name))) {
        assert.isTrue(file.startsWith("api/"), `api/${name} imports ${file}`)
      }
    }
  })
})
