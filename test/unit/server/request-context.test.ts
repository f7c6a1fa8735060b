import { assert, describe, it } from "@effect/vitest"
import { Context } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { KEPT_REFERENCES, keptForRequests, requestContext } from "../../../src/server/RequestContext.ts"

const src = path.join(import.meta.dirname, "../../../src")

const filesOf = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? entry.name === "dist" ? [] : filesOf(path.join(dir, entry.name))
      : entry.name.endsWith(".ts")
      ? [path.join(dir, entry.name)]
      : []
  )

/** The key of every `Context.Reference` declared in src/ (`Context.Reference<…>("key"`). */
const referenceKeys = () =>
  filesOf(src).flatMap((file) =>
    [...fs.readFileSync(file, "utf8").matchAll(/Context\.Reference<[\s\S]*?>\(\s*"([^"]+)"/g)].map((match) => match[1]!)
  )

describe("the services a request fiber starts with", () => {
  it("keep every reference svc declares: a missing one would read as its default, silently", () => {
    const keys = referenceKeys()
    assert.isAtLeast(keys.length, 4)
    for (const key of keys) {
      assert.isTrue(keptForRequests(key), `${key} is a Context.Reference: list it in KEPT_REFERENCES`)
    }
    assert.deepStrictEqual([...KEPT_REFERENCES].sort(), [...new Set(keys)].sort())
  })

  it("leave out svc's domain services and the database clients, keep Effect's", () => {
    const service = (key: string) => Context.Service<unknown>(key)
    const all = [
      "svc/feedback/Feedback",
      "svc/identity/Identity",
      "@effect/sql-pg/PgClient",
      "effect/sql/SqlClient",
      "effect/Tracer",
      "effect/Logger/CurrentLoggers",
      "effect/http/HttpRouter",
      "effect/http/HttpIncomingMessage/MaxBodySize",
      "svc/observability/Metrics"
    ]
    let context = Context.empty() as Context.Context<unknown>
    for (const key of all) context = Context.add(context, service(key), { key })
    const kept = requestContext(context)
    assert.deepStrictEqual([...kept.mapUnsafe.keys()], [
      "effect/Tracer",
      "effect/Logger/CurrentLoggers",
      "effect/http/HttpRouter",
      "effect/http/HttpIncomingMessage/MaxBodySize",
      "svc/observability/Metrics"
    ])
    assert.deepStrictEqual(Context.getUnsafe(kept, service("effect/Tracer")), { key: "effect/Tracer" })
  })
})
