/**
 * The build's checks of what a package holds (scripts/build-packages.ts):
 * @svc/client is src/client.ts and src/api/** only, importing nothing
 * outside itself but `effect`; compiled workers are found by their `.js`
 * name; the `svc` package's pages link only to files it ships.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { checkClientClosure, importsOf, unlinkMissing } from "../../../scripts/build-packages.ts"
import { siblingModule } from "../../../src/platform/ModuleUrl.ts"

const withDist = (files: Record<string, string>, check: (dist: string) => void) => {
  const dist = fs.mkdtempSync(path.join(tmpdir(), "svc-client-dist-"))
  try {
    for (const [name, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(dist, name)), { recursive: true })
      fs.writeFileSync(path.join(dist, name), text)
    }
    check(dist)
  } finally {
    fs.rmSync(dist, { recursive: true, force: true })
  }
}

describe("the client package's contents", () => {
  it("imports are read from static, dynamic and require forms; comments and strings that only look like paths are not imports", () => {
    const code = [
      "import { Effect } from \"effect\"",
      "import * as Http from \"effect/http\"",
      "export { Api } from \"./api/Api.js\"",
      "import \"./side-effect.js\"",
      "const later = await import(\"node:fs\")",
      "const old = require(\"undici\")",
      "// import { x } from \"commented-out\"",
      "/* import \"also-commented\" */",
      "export class SvcClient extends Context.Service()(\"svc/client/SvcClient\") {}"
    ].join("\n")
    assert.sameMembers(importsOf(code), [
      "effect",
      "effect/http",
      "./api/Api.js",
      "./side-effect.js",
      "node:fs",
      "undici"
    ])
  })

  it("the built package passes: client and api/ files importing effect and each other", () => {
    withDist({
      "client.js": "import { Effect } from \"effect\"\nexport * from \"./api/Api.js\"\n",
      "client.d.ts": "export * from \"./api/Api.js\"\n",
      "api/Api.js": "import { HttpApi } from \"effect/http-api\"\n"
    }, (dist) => assert.deepStrictEqual(checkClientClosure(dist), []))
  })

  it("a server module in the build, or an import of anything but effect, fails it", () => {
    withDist({
      "client.js": "import { Effect } from \"effect\"\n",
      "api/Api.js": "import { PgClient } from \"@effect/sql-pg\"\nimport { readFileSync } from \"node:fs\"\n",
      "platform/Config.js": "export const x = 1\n"
    }, (dist) =>
      assert.sameMembers(checkClientClosure(dist), [
        "api/Api.js imports @effect/sql-pg",
        "api/Api.js imports node:fs",
        "platform/Config.js: not src/client.ts nor src/api/**"
      ]))
  })
})

describe("worker scripts", () => {
  it("are named by their source and found by it when svc runs from source", () => {
    const url = siblingModule("./embedded-worker.ts", "file:///repo/src/database/embedded/EmbeddedSession.ts")
    assert.strictEqual(url.href, "file:///repo/src/database/embedded/embedded-worker.ts")
  })
})

describe("the svc package's pages", () => {
  it("a relative link to a file the package does not ship becomes its text; shipped files, anchors, web addresses and code blocks keep theirs", () => {
    const shipped = new Set(["docs/api.md", "CHANGELOG.md"])
    const page = [
      "See [the API](docs/api.md#errors), [the changelog](CHANGELOG.md) and [the bench](bench/README.md).",
      "[`examples/agent.ts`](examples/agent.ts), [up](#top), [Effect](https://effect.website).",
      "```md",
      "[kept in code](bench/README.md)",
      "```"
    ].join("\n")
    assert.strictEqual(
      unlinkMissing(page, (target) => shipped.has(target)),
      [
        "See [the API](docs/api.md#errors), [the changelog](CHANGELOG.md) and the bench.",
        "`examples/agent.ts`, [up](#top), [Effect](https://effect.website).",
        "```md",
        "[kept in code](bench/README.md)",
        "```"
      ].join("\n")
    )
  })
})
