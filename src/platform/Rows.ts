/**
 * Rows decoded by schemas. A row schema names a table's columns once and
 * decodes them to the domain's shape (timestamps to RFC 3339 strings,
 * snake_case columns to the names the domain uses); queries pass their rows
 * through it instead of asserting a row type on the `sql` tag, so a row
 * whose shape the database changed fails loudly.
 *
 * A row that does not decode is a defect, not an error a caller could
 * handle: the schema and the table disagree. It dies with the table's name
 * in the message, so the log says where to look.
 */
import { Data, Effect, Schema, SchemaTransformation } from "effect"
import type { SqlError } from "effect/sql/SqlError"

export class RowDecodeError extends Data.TaggedError("RowDecodeError")<{
  readonly table: string
  readonly detail: string
}> {
  override get message() {
    return `a row of table ${this.table} does not decode: ${this.detail}`
  }
}

/** A `bigint` column (a sequence), which drivers hand over as text. */
export const BigIntText = Schema.Union([Schema.String, Schema.Number, Schema.BigInt]).pipe(
  Schema.decodeTo(
    Schema.String,
    SchemaTransformation.transform<string, string | number | bigint>({
      decode: (value) => String(value),
      encode: (text: string) => text
    })
  )
)

/**
 * A `timestamptz` column kept as a `Date`, for code that computes with
 * instants (deadlines) rather than passing them on. The drivers hand it
 * over as a `Date`, or as text where no type parser is installed.
 */
export const Instant = Schema.declare(
  (value: unknown): value is Date | string => value instanceof Date || typeof value === "string",
  { title: "timestamptz" }
).pipe(
  Schema.decodeTo(
    Schema.Date,
    SchemaTransformation.transform<Date, Date | string>({
      decode: (value) => value instanceof Date ? value : new Date(value),
      encode: (date) => date
    })
  )
)

/** A `timestamptz` column as the API's RFC 3339 string. */
export const Timestamp = Instant.pipe(
  Schema.decodeTo(
    Schema.String,
    SchemaTransformation.transform<string, Date>({
      decode: (date) => date.toISOString(),
      encode: (text: string) => new Date(text)
    })
  )
)

export const InstantOrNull = Schema.NullOr(Instant)

/** A nullable `timestamptz` column. */
export const TimestampOrNull = Schema.NullOr(Timestamp)

/**
 * A `jsonb` column typed as `schema`'s type. The database stores only JSON
 * there, and what was written was decoded by `schema` on its way in, so the
 * value is not walked again on every read (that costs its size per row).
 */
export const JsonColumn = <S extends Schema.Top>(_schema: S) =>
  Schema.declare((value: unknown): value is S["Type"] => value !== undefined, { title: "jsonb" })

/**
 * Decoders for the rows of one table: `all` for a statement's rows, `one`
 * for its first row or `undefined`, `returned` for the row a statement must
 * return (these three die on a database failure too), `decoded` for a
 * statement's rows with its errors kept. The services build their statements at the call site from
 * fragments (optional filters, keyset bounds, column lists), where
 * `SqlSchema`'s request-schema-first form would only wrap them; the rows
 * are decoded the same way it does (`Schema.decodeUnknownEffect` over the
 * row schema), with the table named when one does not decode.
 */
export const rowsOf = <S extends Schema.Constraint & { readonly DecodingServices: never }>(table: string, row: S) => {
  const decodeAll = Schema.decodeUnknownEffect(Schema.Array(row))
  /**
   * The statement's rows, its own errors kept (for callers that act on
   * them, e.g. a retry or a transaction's rollback); only an undecodable row dies.
   */
  const decoded = <E, R>(
    rows: Effect.Effect<ReadonlyArray<unknown>, E, R>
  ): Effect.Effect<ReadonlyArray<S["Type"]>, E, R> =>
    Effect.flatMap(
      rows,
      (found) =>
        Effect.catchTag(decodeAll(found), "SchemaError", (error) =>
          Effect.die(new RowDecodeError({ table, detail: error.message })))
    )
  const all = <R>(
    rows: Effect.Effect<ReadonlyArray<unknown>, SqlError, R>
  ): Effect.Effect<ReadonlyArray<S["Type"]>, never, R> => Effect.orDie(decoded(rows))
  const one = <R>(
    rows: Effect.Effect<ReadonlyArray<unknown>, SqlError, R>
  ): Effect.Effect<S["Type"] | undefined, never, R> =>
    Effect.map(all(Effect.map(rows, (found) => found.slice(0, 1))), (decoded) => decoded[0])
  /** The row a statement must return (an INSERT or UPDATE … RETURNING of a row known to exist); none is a defect. */
  const returned = <R>(rows: Effect.Effect<ReadonlyArray<unknown>, SqlError, R>): Effect.Effect<S["Type"], never, R> =>
    Effect.flatMap(
      one(rows),
      (row) =>
        row === undefined
          ? Effect.die(new RowDecodeError({ table, detail: "the statement returned no row" }))
          : Effect.succeed(row)
    )
  return { all, one, returned, decoded }
}

/** What an INSERT of a task's record returns that svc did not send: the task and the creation time. */
export interface Created {
  readonly task_id: string
  readonly created_at: string
}

/**
 * The first row of an INSERT's `RETURNING task_id, created_at` as the
 * drivers hand it over (a `Date`, or text on a client with no type
 * parser), checked by hand: a schema decoder over these columns cost more
 * than the check (the timestamp goes through two transformations). None:
 * nothing was inserted. Used by the logged-run and feedback INSERTs
 * (`src/tasks/RunInsert.ts`, `src/feedback/InsertStatement.ts`).
 */
export const createdRow = (table: string) => (rows: ReadonlyArray<unknown>): Effect.Effect<Created | undefined> => {
  const row = rows[0] as { readonly task_id?: unknown; readonly created_at?: unknown } | undefined
  if (row === undefined) return Effect.succeed(undefined)
  const at = row.created_at
  if (typeof row.task_id === "string" && (at instanceof Date || typeof at === "string")) {
    const date = at instanceof Date ? at : new Date(at)
    if (!Number.isNaN(date.getTime())) return Effect.succeed({ task_id: row.task_id, created_at: date.toISOString() })
  }
  return Effect.die(new RowDecodeError({ table, detail: "expected task_id (text) and created_at (timestamptz)" }))
}
