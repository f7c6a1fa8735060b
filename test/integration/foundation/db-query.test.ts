/**
 * `db query` cannot hurt the session every request shares: it reads only,
 * whatever it did is rolled back (a session setting included), it takes one
 * statement, and it is stopped after `QUERY_TIMEOUT` on either database (on
 * the embedded one, it runs on a copy of the data, never on the session).
 */
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect, Fiber } from "effect"
import { SqlClient } from "effect/sql"
import { databaseMessage, QUERY_TIMEOUT, readOnlyQuery } from "../../../src/cli/DbCommands.ts"
import { DatabaseInfo } from "../../../src/database/Database.ts"
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

    it.effect(
      "a statement longer than QUERY_TIMEOUT is stopped, and meanwhile another organization's requests answer promptly",
      () =>
        Effect.gen(function*() {
          const info = yield* DatabaseInfo
          const org = yield* SvcTest.org()
          const started = performance.now()
          const slow = yield* Effect.forkChild(Effect.flip(readOnlyQuery("SELECT pg_sleep(30)")))
          // Requests of another organization for as long as the statement runs.
          const latencies: Array<number> = []
          while (slow.pollUnsafe() === undefined) {
            const sent = performance.now()
            yield* org.client.notifications.list()
            latencies.push(performance.now() - sent)
            // Paced: the check is each answer's latency, not how many fit.
            yield* Effect.sleep("20 millis")
          }
          const error = yield* Fiber.join(slow)
          const elapsed = performance.now() - started
          assert.include(
            databaseMessage(error),
            info.kind === "server"
              ? "statement timeout"
              : `db query's time limit (${Duration.toMillis(QUERY_TIMEOUT)} ms)`
          )
          // The limit plus a margin for opening the copy on a busy machine; the statement alone would take 30 s.
          assert.isBelow(elapsed, Duration.toMillis(QUERY_TIMEOUT) + 15_000)
          assert.isAbove(latencies.length, 0)
          assert.isBelow(Math.max(...latencies), 3_000, `latencies: ${latencies.map(Math.round).join(", ")}`)
          // The shared session still answers.
          yield* org.client.notifications.list()
        }),
      60_000
    )
  })
})
