/**
 * `svc db`: one read-only statement, run so that nothing it does outlives
 * it (`readOnlyQuery`), and the embedded database's data as SQL (`dump`).
 */
import * as Argument from "effect/cli/Argument"
import * as Command from "effect/cli/Command"
import * as Console from "effect/Console"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { SqlClient } from "effect/sql"
import { fail, json, loadDatabaseInfo, loadSql } from "./Common.ts"

/** JSON with bigints as strings and dates as ISO text. */
const toJson = (value: unknown) =>
  JSON.stringify(
    value,
    (_, v) => typeof v === "bigint" ? v.toString() : v instanceof Uint8Array ? Buffer.from(v).toString("hex") : v
  )

/** How long `db query`'s statement may run, on either database. */
export const QUERY_TIMEOUT = Duration.seconds(5)

/**
 * Memory of the thread that runs `db query` on a copy of the embedded
 * database (its JavaScript heap: the rows it answers).
 */
const QUERY_MEMORY = { maxOldGenerationSizeMb: 256, maxYoungGenerationSizeMb: 32 }

/** Carries the rows out of the transaction, which it rolls back. */
class RolledBack extends Data.TaggedError("RolledBack")<{ readonly rows: ReadonlyArray<Record<string, unknown>> }> {}

/** `statement` in a READ ONLY transaction that is always rolled back, cancelled by the server after `QUERY_TIMEOUT`. */
const rolledBack = (sql: SqlClient.SqlClient, statement: string) =>
  sql.withTransaction(Effect.gen(function*() {
    yield* sql.unsafe("SET TRANSACTION READ ONLY")
    yield* sql.unsafe(`SET LOCAL statement_timeout = ${Duration.toMillis(QUERY_TIMEOUT)}`)
    return yield* new RolledBack({ rows: yield* sql.unsafe<Record<string, unknown>>(statement) })
  })).pipe(Effect.catchTag("RolledBack", (done) => Effect.succeed(done.rows)))

/**
 * One statement run read-only, and everything it did undone: in a
 * transaction that is READ ONLY and always rolled back, so that not even a
 * session setting (`set_config(..., false)`, which a read-only transaction
 * allows) outlives it, and bounded by `QUERY_TIMEOUT`. More than one
 * statement is refused: the statement runs prepared, which takes exactly
 * one (a `COMMIT; ...` would otherwise leave the transaction).
 *
 * On a server the database cancels it. The embedded database can neither
 * bound nor cancel a statement, and its one session serves every request:
 * so the statement never runs there. The session is held only while PGlite
 * copies the data folder (`dumpDataDir`: a consistent copy, since nothing
 * else runs meanwhile), and the statement runs on that copy, opened in
 * memory in a thread of its own that is ended at `QUERY_TIMEOUT` and whose
 * heap is bounded (`QUERY_MEMORY`).
 */
export const readOnlyQuery = (statement: string) =>
  Effect.gen(function*() {
    const sql = yield* loadSql
    const info = yield* loadDatabaseInfo
    if (info.embedded === undefined) return yield* rolledBack(sql, statement)
    const embedded = info.embedded
    const copy = yield* sql.withTransaction(embedded.request({ op: "snapshot" }))
    const { startSession } = yield* Effect.promise(() => import("../database/embedded/EmbeddedSession.ts"))
    const { makeEmbeddedClient } = yield* Effect.promise(() => import("../database/embedded/EmbeddedClient.ts"))
    const { Reactivity } = yield* Effect.promise(() => import("effect/reactivity"))
    return yield* Effect.scoped(Effect.gen(function*() {
      const session = yield* startSession({
        dataDir: undefined,
        snapshot: copy.snapshot!,
        statementTimeout: QUERY_TIMEOUT,
        transactionTimeout: QUERY_TIMEOUT,
        resourceLimits: QUERY_MEMORY,
        limitName: "db query's time limit"
      })
      const client = yield* makeEmbeddedClient(session).pipe(Effect.provide(Reactivity.layer))
      // No ROLLBACK: the copy is thrown away (and after the time limit its thread is gone).
      yield* client.unsafe("BEGIN READ ONLY")
      return yield* client.unsafe<Record<string, unknown>>(statement)
    }))
  })

/** What the database said: the innermost cause's message (a client's own message says only that the query failed). */
export const databaseMessage = (error: unknown): string => {
  let message = error instanceof Error ? error.message : String(error)
  let at: unknown = error
  for (let depth = 0; depth < 5 && typeof at === "object" && at !== null; depth++) {
    const next: unknown = "reason" in at && at.reason !== undefined ? at.reason : "cause" in at ? at.cause : undefined
    if (next instanceof Error && next.message !== "") message = next.message
    at = next
  }
  return message
}

const dbQuery = Command.make(
  "query",
  {
    statement: Argument.String("statement").pipe(
      Argument.withDescription(
        `One SQL statement, run read-only and rolled back, for at most ${Duration.format(QUERY_TIMEOUT)}`
      )
    ),
    json
  },
  Effect.fn(function*({ statement, json }) {
    const rows = yield* readOnlyQuery(statement).pipe(
      Effect.catchTag("SqlError", (error) => fail(`the query failed: ${databaseMessage(error)}`))
    )
    yield* Console.log(json ? toJson({ rows }) : rows.map(toJson).join("\n") || "(no rows)")
  })
).pipe(Command.withDescription(
  `Run one read-only SQL statement (at most ${
    Duration.format(QUERY_TIMEOUT)
  }; on the embedded database, on a copy of its data), roll it back, and print its rows`
))

const dbDump = Command.make(
  "dump",
  {},
  Effect.fn(function*() {
    const info = yield* loadDatabaseInfo
    if (info.embedded === undefined) {
      return yield* fail("on a PostgreSQL server use pg_dump itself: pg_dump \"$DATABASE_URL\"")
    }
    const sql = yield* loadSql
    // In a transaction of its own: the dump holds the session (nothing else
    // runs between its statements) and reads one consistent snapshot.
    const answer = yield* sql.withTransaction(info.embedded.request({ op: "dump" })).pipe(
      Effect.catchTag("SqlError", (error) => fail(`the dump failed: ${error.message}`))
    )
    yield* Console.log(answer.dump ?? "")
  })
).pipe(Command.withDescription("Print the embedded database's data as SQL for psql, to load into a PostgreSQL server"))

export const db = Command.make("db").pipe(
  Command.withDescription("Look into the database: read-only queries and a SQL export"),
  Command.withSubcommands([dbQuery, dbDump])
)
