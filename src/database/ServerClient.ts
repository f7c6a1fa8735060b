/**
 * The `PgClient` on a PostgreSQL server: `@effect/sql-pg`'s pool and wire
 * protocol, assembled here as `PgClient.make` assembles them, so that every
 * statement's answer passes `countStatement` (`WorkCounts.ts`) on its way
 * back: the command tag and row count the driver already parsed, read
 * without a copy. `PgClient.make` keeps its connection wrapper private,
 * hence this assembly of its public parts (`PgPool`, `PgClient.makeCompiler`,
 * `SqlClient.make`); it follows `@effect/sql-pg` 4.0 and a test
 * (`test/integration/database/work-counts.test.ts`) fails if the counts no
 * longer match the work.
 */
import { PgClient, PgPool } from "@effect/sql-pg"
import type * as PgConnection from "@effect/sql-pg/PgConnection"
import { Effect, type Scope, Stream } from "effect"
import type * as Arr from "effect/Array"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import type { Connection } from "effect/sql/SqlConnection"
import { SqlError, UnknownError } from "effect/sql/SqlError"
import * as Statement from "effect/sql/Statement"
import { countStatement, type TransactionState } from "./WorkCounts.ts"

type TransformRows = (<A extends object>(row: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined

/** One lease of a pooled session; counts what it runs. */
class CountingConnection implements Connection, TransactionState {
  inTransaction = false
  readonly connection: PgConnection.PgConnection
  constructor(connection: PgConnection.PgConnection) {
    this.connection = connection
  }
  private query(sql: string, params: ReadonlyArray<unknown>, prepare = true) {
    return Effect.map(this.connection.query(sql, params, prepare), (result) => {
      countStatement(this, result.command, result.rowCount)
      return result
    })
  }
  private run(sql: string, params: ReadonlyArray<unknown>, prepare = true) {
    return Effect.map(this.query(sql, params, prepare), (result) => result.rows)
  }
  private values(sql: string, params: ReadonlyArray<unknown>, prepare = true) {
    return Effect.map(this.connection.queryValues(sql, params, prepare), (rows) => {
      countStatement(this, undefined, undefined)
      return rows
    })
  }
  execute(sql: string, params: ReadonlyArray<unknown>, transformRows: TransformRows) {
    return transformRows ? Effect.map(this.run(sql, params), transformRows) : this.run(sql, params)
  }
  executeRaw(sql: string, params: ReadonlyArray<unknown>) {
    return this.query(sql, params)
  }
  executeWithoutTransform(sql: string, params: ReadonlyArray<unknown>) {
    return this.run(sql, params)
  }
  executeValues(sql: string, params: ReadonlyArray<unknown>) {
    return this.values(sql, params)
  }
  executeValuesUnprepared(sql: string, params: ReadonlyArray<unknown>) {
    return this.values(sql, params, false)
  }
  executeUnprepared(sql: string, params: ReadonlyArray<unknown>, transformRows: TransformRows) {
    const operation = this.run(sql, params, false)
    return transformRows ? Effect.map(operation, transformRows) : operation
  }
  executeStream(sql: string, params: ReadonlyArray<unknown>, transformRows: TransformRows) {
    countStatement(this, undefined, undefined)
    const stream = this.connection.stream(sql, params)
    return transformRows
      ? Stream.mapArray(stream, (rows) => transformRows(rows) as Arr.NonEmptyReadonlyArray<PgConnection.Row>)
      : stream
  }
}

/** PostgreSQL answers `ROLLBACK` to the `COMMIT` of an aborted transaction. */
const commit = (conn: Connection): Effect.Effect<void, SqlError> =>
  Effect.flatMap(
    conn.executeRaw("COMMIT", []) as Effect.Effect<PgConnection.Result, SqlError>,
    (result) =>
      result.command === "ROLLBACK"
        ? Effect.fail(
          new SqlError({
            reason: new UnknownError({
              cause: new Error("COMMIT rolled back an aborted transaction"),
              message: "PgClient: COMMIT rolled back an aborted transaction",
              operation: "commit"
            })
          })
        )
        : Effect.void
  )

const PgJson = Statement.custom<Statement.Custom<"PgJson", unknown>>("PgJson")
const channelBytes = new TextEncoder()

/** A pooled client on the server `config` names, counting its work. */
const makeServerClient = (
  config: PgClient.PgPoolConfig
): Effect.Effect<PgClient.PgClient, SqlError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function*() {
    const pool = yield* PgPool.make(config)
    const lease = (connection: PgConnection.PgConnection) => new CountingConnection(connection)
    const client = yield* SqlClient.make({
      acquirer: Effect.map(pool.get, lease),
      borrower: (f) => pool.use((connection) => f(lease(connection))),
      transactionAcquirer: Effect.map(pool.reserve, lease),
      compiler: PgClient.makeCompiler(config.transformQueryNames, config.transformJson),
      driver: "pg",
      prepareTransactionControls: true,
      commit,
      releaseSavepoint: (name) => `RELEASE SAVEPOINT ${name}`,
      transformRows: config.transformResultNames
        ? Statement.defaultTransforms(config.transformResultNames, config.transformJson).array
        : undefined,
      spanAttributes: [
        ["db.system.name", "postgresql"],
        ["db.namespace", config.database ?? config.username ?? "postgres"],
        ["server.address", config.host ?? "localhost"],
        ["server.port", config.port ?? 5432]
      ]
    })
    return Object.assign(client, {
      [PgClient.TypeId]: PgClient.TypeId,
      config,
      json: (value: unknown) => Statement.fragment([PgJson(value, undefined, undefined)]),
      listen: (channel: string) => Effect.flatMap(pool.reserve, (connection) => connection.listen(channel)),
      notify: (channel: string, payload: string) =>
        channelBytes.encode(channel).byteLength > 63
          ? Effect.fail(
            new SqlError({
              reason: new UnknownError({
                cause: new Error("PostgreSQL channel names must not exceed 63 UTF-8 bytes"),
                message: "PostgreSQL channel names must not exceed 63 UTF-8 bytes",
                operation: "notify"
              })
            })
          )
          : Effect.asVoid(Effect.scoped(Effect.flatMap(
            pool.get,
            (connection) => lease(connection).executeRaw("SELECT pg_notify($1, $2)", [channel, payload])
          )))
    }) as PgClient.PgClient
  })

/** `PgClient.layer`, counting: provides `PgClient` and `SqlClient`. */
export const serverClientLayer = (config: PgClient.PgPoolConfig) => PgClient.layerFrom(makeServerClient(config))
