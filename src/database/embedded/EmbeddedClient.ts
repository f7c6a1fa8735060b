/**
 * The embedded session (`EmbeddedSession.ts`) offered to the services as
 * an `@effect/sql-pg` `PgClient`: statements compiled with the same
 * PostgreSQL dialect (`PgClient.makeCompiler`), parameters bound with the
 * same types (`EmbeddedParameters.ts`), and the session lent to one
 * statement or one whole transaction at a time.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Fiber, Scope, Stream } from "effect"
import type { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import type { Connection } from "effect/sql/SqlConnection"
import type { SqlError } from "effect/sql/SqlError"
import * as Statement from "effect/sql/Statement"
import { countStatement, type TransactionState } from "../WorkCounts.ts"
import { toPglite } from "./EmbeddedParameters.ts"
import { type EmbeddedSession, millis, StatementAllowance, unknownError } from "./EmbeddedSession.ts"
import { makeEmbeddedTurns } from "./EmbeddedTurns.ts"

const PgJson = Statement.custom<Statement.Custom<"PgJson", unknown>>("PgJson")

class EmbeddedConnection implements Connection, TransactionState {
  inTransaction = false
  readonly session: EmbeddedSession
  constructor(session: EmbeddedSession) {
    this.session = session
  }
  private run(sql: string, params: ReadonlyArray<unknown>, values = false, prepare = true) {
    const bound = toPglite(params)
    return Effect.map(
      Effect.withFiber((fiber) =>
        this.session.request(
          { op: "query", sql, params: bound.params, types: bound.types, values, prepare },
          fiber.getRef(StatementAllowance)
        )
      ),
      (answer) => {
        const result = answer.result!
        countStatement(this, result.command, result.affectedRows)
        return result
      }
    )
  }
  execute(
    sql: string,
    params: ReadonlyArray<unknown>,
    transformRows: (<A extends object>(row: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined
  ) {
    return Effect.map(
      this.run(sql, params),
      (result) => transformRows ? transformRows(result.rows as Array<object>) : result.rows
    )
  }
  executeRaw(sql: string, params: ReadonlyArray<unknown>) {
    return this.run(sql, params)
  }
  executeValues(sql: string, params: ReadonlyArray<unknown>) {
    return Effect.map(this.run(sql, params, true), (result) => result.rows as ReadonlyArray<ReadonlyArray<unknown>>)
  }
  // Unprepared, as on a server: the unnamed statement, parsed each time.
  executeValuesUnprepared(sql: string, params: ReadonlyArray<unknown>) {
    return Effect.map(
      this.run(sql, params, true, false),
      (result) => result.rows as ReadonlyArray<ReadonlyArray<unknown>>
    )
  }
  executeUnprepared(
    sql: string,
    params: ReadonlyArray<unknown>,
    transformRows: (<A extends object>(row: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined
  ) {
    return Effect.map(
      this.run(sql, params, false, false),
      (result) => transformRows ? transformRows(result.rows as Array<object>) : result.rows
    )
  }
  executeStream(
    sql: string,
    params: ReadonlyArray<unknown>,
    transformRows: (<A extends object>(row: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined
  ) {
    return Stream.fromArrayEffect(this.execute(sql, params, transformRows))
  }
}

/** PostgreSQL answers `ROLLBACK` to the `COMMIT` of an aborted transaction (as `PgClient` checks). */
const commit = (conn: Connection): Effect.Effect<void, SqlError> =>
  Effect.flatMap(
    conn.executeRaw("COMMIT", []) as Effect.Effect<{ readonly command: string | undefined }, SqlError>,
    (result) =>
      result.command === "ROLLBACK"
        ? Effect.fail(unknownError("COMMIT rolled back an aborted transaction", "commit"))
        : Effect.void
  )

/**
 * The `PgClient` over `session`. LISTEN is not offered (one session has no
 * one else to hear it: `Wakeups` wakes in-process); NOTIFY is accepted and
 * goes nowhere.
 */
export const makeEmbeddedClient = (
  session: EmbeddedSession
): Effect.Effect<PgClient.PgClient, never, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function*() {
    const connection = new EmbeddedConnection(session)
    // One statement or transaction at a time, organizations in turn.
    const turns = makeEmbeddedTurns()
    const holdBound = Duration.sum(session.transactionTimeout, session.statementTimeout)
    // A transaction (or a reserved connection) holds the session until its
    // scope closes; past the bound its fiber is interrupted, which rolls it back.
    const acquirer = Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const holder = Fiber.getCurrent()!
        const scope = Context.getUnsafe(holder.context, Scope.Scope)
        yield* restore(turns.take)
        const watchdog = yield* Effect.forkDetach(
          Effect.sleep(holdBound).pipe(
            Effect.andThen(Effect.logWarning(
              `a transaction held the embedded database longer than ${
                millis(holdBound)
              }; it is interrupted and rolled back`
            )),
            Effect.andThen(Fiber.interrupt(holder))
          )
        )
        yield* Scope.addFinalizer(scope, Effect.andThen(Fiber.interrupt(watchdog), turns.release))
        return connection as Connection
      })
    )
    const client = yield* SqlClient.make({
      acquirer,
      borrower: (f) => turns.withTurn(f(connection)),
      transactionAcquirer: acquirer,
      compiler: PgClient.makeCompiler(undefined, true),
      driver: "pglite",
      prepareTransactionControls: true,
      commit,
      releaseSavepoint: (name) => `RELEASE SAVEPOINT ${name}`,
      spanAttributes: [["db.system.name", "postgresql"], ["db.namespace", "postgres"]]
    })
    return Object.assign(client, {
      [PgClient.TypeId]: PgClient.TypeId,
      config: {} as PgClient.PgClientConfig,
      // The fragment `PgClient.json` makes: the compiler turns it into a jsonb parameter.
      json: (value: unknown) => Statement.fragment([PgJson(value, undefined, undefined)]),
      listen: (_channel: string) =>
        Effect.fail(unknownError(
          "the embedded database is one session: LISTEN has no one to hear",
          "listen",
          "LISTEN needs a PostgreSQL server"
        )),
      notify: (_channel: string, _payload: string) => Effect.void
    }) as unknown as PgClient.PgClient
  })
