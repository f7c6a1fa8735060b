/**
 * `db query` cannot hurt the session every request shares: it reads only,
 * whatever it did is rolled back (a session setting included), it takes one
 * statement, and on a server it is cancelled after `QUERY_TIMEOUT`.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { databaseMessage, readOnlyQuery } from "../../../src/cli/Commands.ts"
import { DatabaseInfo } from "../../../src/platform/Database.ts"
import { SvcTest } from "../../../src/testing.ts"

const searchPath = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql<{ search_path: string }>`SHOW search_path`
  return row!.search_path
})

layer(SvcTest.layer(), { excludeTestServices: true })("db query", (it) => {
  describe("the shared session", () => {
    it.effect("a session setting changed by the statement does not outlive it; requests still answer", () =>
      Effect.gen(function*() {
        const before = yield* searchPath
        const rows = yield* readOnlyQuery("SELECT set_config('search_path', 'nothing', false) AS changed")
        assert.deepStrictEqual(rows, [{ changed: "nothing" }])
        assert.strictEqual(yield* searchPath, before)
        const org = yield* SvcTest.org()
        const listed = yield* org.client.notifications.list()
        assert.isArray(listed.endpoints ?? listed)
      }))

    it.effect("writes are refused, and so is more than one statement (a COMMIT that would leave the transaction)", () =>
      Effect.gen(function*() {
        const before = yield* searchPath
        const write = yield* Effect.flip(readOnlyQuery("CREATE TABLE db_query_probe (id int)"))
        assert.include(databaseMessage(write), "read-only")
        const escape = yield* Effect.flip(
          readOnlyQuery("SELECT 1; COMMIT; SELECT set_config('search_path', 'nothing', false)")
        )
        assert.include(databaseMessage(escape), "multiple commands")
        assert.strictEqual(yield* searchPath, before)
      }))

    it.effect("on a server, a statement longer than QUERY_TIMEOUT is cancelled", () =>
      Effect.gen(function*() {
        const info = yield* DatabaseInfo
        if (info.kind !== "server") return
        const started = Date.now()
        const slow = yield* Effect.flip(readOnlyQuery("SELECT pg_sleep(15)"))
        assert.include(databaseMessage(slow), "statement timeout")
        assert.isBelow(Date.now() - started, 10_000)
      }), 30_000)
  })
})
