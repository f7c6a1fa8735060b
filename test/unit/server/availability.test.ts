import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Layer, Option } from "effect"
import { HttpRouter } from "effect/http"
import { SqlError } from "effect/sql"
import { databaseUnavailable } from "../../../src/platform/DatabaseUnavailable.ts"
import { RETRY_AFTER_SECONDS } from "../../../src/server/Availability.ts"
import { RequestMiddleware } from "../../../src/server/Middleware.ts"

const pgError = (code: string) => Object.assign(new Error("server said no"), { code })

const sqlError = (reason: SqlError.SqlErrorReason) => new SqlError.SqlError({ reason })

describe("which failures mean the database is unavailable for now (503, not 500)", () => {
  it("a connection that fails or drops, a statement timeout, a server shutting down or starting up", () => {
    const unavailable = [
      sqlError(new SqlError.ConnectionError({ cause: Object.assign(new Error("connect"), { code: "ECONNREFUSED" }) })),
      sqlError(new SqlError.StatementTimeoutError({ cause: pgError("57014") })),
      sqlError(new SqlError.UnknownError({ cause: pgError("57P01") })),
      sqlError(new SqlError.UnknownError({ cause: pgError("57P03") })),
      sqlError(new SqlError.UnknownError({ cause: pgError("53300") }))
    ]
    for (const error of unavailable) {
      assert.isTrue(Option.isSome(databaseUnavailable(Cause.die(error))), error.reason._tag)
      assert.isTrue(Option.isSome(databaseUnavailable(Cause.fail(error))), error.reason._tag)
    }
    const refused = databaseUnavailable(Cause.die(unavailable[0]!))
    assert.deepStrictEqual(refused, Option.some("the database cannot be reached (ECONNREFUSED)"))
  })

  it("anything else stays what it is: bugs, constraint violations, other defects", () => {
    const others = [
      Cause.die(sqlError(new SqlError.SqlSyntaxError({ cause: pgError("42601") }))),
      Cause.die(sqlError(new SqlError.UniqueViolation({ cause: pgError("23505"), constraint: "x" }))),
      Cause.die(sqlError(new SqlError.UnknownError({ cause: pgError("22P02") }))),
      Cause.die(new Error("a bug")),
      Cause.fail("not found")
    ]
    for (const cause of others) assert.isTrue(Option.isNone(databaseUnavailable(cause)))
  })
})

describe("a database outage on a route outside the API is a 503 too", () => {
  it("the router middleware answers 503 SERVICE_UNAVAILABLE with Retry-After, not 500", async () => {
    const outage = sqlError(
      new SqlError.ConnectionError({ cause: Object.assign(new Error("connect"), { code: "ECONNREFUSED" }) })
    )
    const { handler, dispose } = HttpRouter.toWebHandler(
      Layer.mergeAll(
        HttpRouter.add("GET", "/outage", Effect.die(outage)),
        HttpRouter.add("GET", "/bug", Effect.die(new Error("a bug"))),
        RequestMiddleware
      ),
      { disableLogger: true }
    )
    try {
      const down = await handler(new Request("http://svc.test/outage"))
      assert.strictEqual(down.status, 503)
      assert.strictEqual(down.headers.get("retry-after"), String(RETRY_AFTER_SECONDS))
      const body = await down.json() as { code: string; detail: string }
      assert.strictEqual(body.code, "SERVICE_UNAVAILABLE")
      assert.include(body.detail, "the database cannot be reached (ECONNREFUSED)")
      const bug = await handler(new Request("http://svc.test/bug"))
      assert.strictEqual(bug.status, 500)
      assert.isNull(bug.headers.get("retry-after"))
    } finally {
      await dispose()
    }
  })
})
