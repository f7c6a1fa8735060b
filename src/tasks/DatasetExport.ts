/**
 * A dataset version as JSON Lines (`GET /v1/datasets/:id/export`, docs/feedback.md,
 * "Exporting a version"): one example per line, in the version's order,
 * read in bounded pages and written as it is read, so an export holds one
 * page in memory whatever the version's size.
 *
 * The lines are PostgreSQL's own text of each example
 * (`jsonb_build_object(...)::text`), stored as the example is written
 * (`line`, migration 0980): the same bytes on every export and on either
 * database, numbers exactly as stored (no round trip through JavaScript
 * numbers), nothing to parse here, and nothing to build either: a page
 * reads stored text. A page is cut by the stored length of each line
 * (`line_bytes`, migration 0790): it reads the lines it returns and no
 * others, so a page costs what it sends.
 *
 * An organization's exports read at most `EXPORT_PAGES_AT_ONCE` pages at
 * a time in a process, whatever the number of its readers, so that they
 * never hold more of the database than that: on a server, two of the
 * process's ten connections (a hundred exports of a 29 MB version, each
 * page one 1.8 MB example, held every connection and another organization's
 * reads timed out at 15 s); on the embedded database, whose one session
 * runs statements in the order they come, one page is all it queues
 * ahead of another organization's reads. A page holds no permit while its
 * chunk waits for its reader.
 *
 * A version never changes, so the export's SHA-256 and length are computed
 * once, by the first export, and stored with the version (migration 0690);
 * every export sends them before its first byte. Concurrent first exports,
 * in any process, compute them once: one claims the version in the
 * database and measures it, the others wait for what it stores.
 */
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Duration, Effect, Exit, Layer, Option, Schema, Stream } from "effect"
import type { SqlError } from "effect/sql"
import crypto from "node:crypto"
import { InvalidRequest, NotFound } from "../api/Errors.ts"
import { SvcConfig } from "../platform/Config.ts"
import { makeOrgPermits } from "../platform/OrgPermits.ts"
import { BigIntText, rowsOf } from "../platform/Rows.ts"

/** Rows per page: one statement each, bounded by the statement timeout. */
const EXPORT_PAGE_ROWS = 500
/** A page stops at the row that crosses this many bytes (it always holds at least one row). */
export const EXPORT_PAGE_BYTES = 1024 * 1024
/**
 * On a server, a line longer than this is read in pieces of this many
 * bytes, one statement each: the driver gathers a row's message in one
 * buffer, copied again as each 64 KiB of it arrives, so a 1.8 MB line cost
 * its size squared over 64 KiB in copies (tens of megabytes) on the event loop.
 */
export const EXPORT_PIECE_BYTES = 256 * 1024
/** Pages one organization's exports read at once in a process: on the embedded database, and on a server. */
const EXPORT_PAGES_AT_ONCE = { embedded: 1, server: 2 } as const

const VersionRows = rowsOf(
  "datasets",
  Schema.Struct({
    version: Schema.Number,
    lineage_id: Schema.String,
    example_count: Schema.Number,
    export_sha256: Schema.NullOr(Schema.String),
    export_bytes: Schema.NullOr(BigIntText)
  })
)
const DigestRows = rowsOf(
  "datasets",
  Schema.Struct({ export_sha256: Schema.NullOr(Schema.String), export_bytes: Schema.NullOr(BigIntText) })
)
/** How often a first export that another is measuring looks for the stored values. */
const CLAIM_POLL = Duration.millis(100)
const LineRows = rowsOf(
  "dataset_examples",
  Schema.Struct({ position: Schema.Number, line: Schema.NullOr(Schema.String), line_bytes: Schema.Number })
)
const LineBytesRows = rowsOf(
  "dataset_examples",
  Schema.Struct({ position: Schema.Number, line: Schema.NullOr(Schema.Uint8Array), line_bytes: Schema.Number })
)
const PieceRows = rowsOf("dataset_examples", Schema.Struct({ piece: Schema.Uint8Array }))
const PieceTextRows = rowsOf("dataset_examples", Schema.Struct({ piece: Schema.String }))
const NEWLINE = new Uint8Array([0x0a])

/** What an export answers: the checksum and size of the whole export, the line count, and the lines from `after` on. */
export interface ExportAnswer {
  /** The version's number. */
  readonly version: number
  /** SHA-256 of the whole export (every line), base64. */
  readonly sha256: string
  /** Bytes of the whole export. */
  readonly bytes: number
  /** Lines of the whole export (the version's examples). */
  readonly lines: number
  /** The lines after the first `after`, as bytes. */
  readonly body: Stream.Stream<Uint8Array>
}

export class DatasetExport extends Context.Service<DatasetExport, {
  readonly open: (
    orgId: string,
    datasetId: string,
    after: number
  ) => Effect.Effect<ExportAnswer, NotFound | InvalidRequest>
}>()("svc/tasks/DatasetExport") {
  static readonly layer = Layer.effect(
    DatasetExport,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const config = yield* SvcConfig
      const pagesAtOnce = Option.isNone(config.databaseUrl)
        ? EXPORT_PAGES_AT_ONCE.embedded
        : EXPORT_PAGES_AT_ONCE.server
      const pagePermits = makeOrgPermits(pagesAtOnce)
      // A line longer than EXPORT_PIECE_BYTES is read in pieces of that many bytes, one statement and one chunk
      // each, as the reader takes them: no statement reads, and no export holds, more than a piece of it. On a
      // server a line comes as its UTF-8 bytes (`bytea`, binary): not decoded into a string on the event loop to
      // be encoded again. The embedded database answers `bytea` as hexadecimal text, slower to read than the
      // line itself: there, a short line comes as text and a piece as base64.
      const asBytes = Option.isSome(config.databaseUrl)
      const lineColumn = asBytes
        ? sql`CASE WHEN line_bytes <= ${EXPORT_PIECE_BYTES} THEN convert_to(line, 'UTF8') END AS line, line_bytes`
        : sql`CASE WHEN line_bytes <= ${EXPORT_PIECE_BYTES} THEN line END AS line, line_bytes`
      type Line = { readonly position: number; readonly line: string | Uint8Array | null; readonly line_bytes: number }
      const lineRows = (statement: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>): Effect.Effect<
        ReadonlyArray<Line>
      > => asBytes ? LineBytesRows.all(statement) : LineRows.all(statement)
      const pieceColumn = (offset: number) =>
        asBytes
          ? sql`substring(convert_to(line, 'UTF8') FROM ${offset + 1} FOR ${EXPORT_PIECE_BYTES}) AS piece`
          : sql`encode(substring(convert_to(line, 'UTF8') FROM ${
            offset + 1
          } FOR ${EXPORT_PIECE_BYTES}), 'base64') AS piece`
      /** A long line's bytes from `offset`, at most EXPORT_PIECE_BYTES of them; none when the row is missing. */
      const pieceRows = (statement: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>): Effect.Effect<
        ReadonlyArray<{ readonly piece: string | Uint8Array }>
      > => asBytes ? PieceRows.all(statement) : PieceTextRows.all(statement)
      const piece = (
        orgId: string,
        lineageId: string,
        position: number,
        offset: number
      ): Effect.Effect<Uint8Array | undefined> =>
        pagePermits.withPermit(
          orgId,
          Effect.map(
            pieceRows(sql`
              SELECT ${pieceColumn(offset)}
              FROM dataset_examples WHERE lineage_id = ${lineageId} AND position = ${position}
            `),
            ([found]) =>
              found === undefined
                ? undefined
                : typeof found.piece === "string"
                ? Buffer.from(found.piece, "base64") as Uint8Array
                : found.piece
          )
        )
      /** Short lines, each ended by a newline, as one chunk. */
      const chunkOf = (rows: ReadonlyArray<Line>) =>
        asBytes
          ? Buffer.concat(rows.flatMap((row) => [row.line as Uint8Array, NEWLINE])) as Uint8Array
          : Buffer.from(rows.map((row) => row.line).join("\n") + "\n", "utf8") as Uint8Array

      // One page: up to EXPORT_PAGE_ROWS rows from `from`, cut after the
      // row that crosses EXPORT_PAGE_BYTES. The cut (the sub-select, run
      // once) reads stored lengths only; the lines are read for the rows up
      // to it, both reads ranges of the primary key.
      const page = (orgId: string, lineageId: string, from: number, to: number) =>
        pagePermits.withPermit(
          orgId,
          lineRows(sql`
          SELECT position, ${lineColumn}
          FROM dataset_examples
          WHERE lineage_id = ${lineageId} AND position >= ${from} AND position <= (
            SELECT max(position) FROM (
              SELECT position, sum(line_bytes) OVER (ORDER BY position) - line_bytes AS bytes_before
              FROM (
                SELECT position, line_bytes FROM dataset_examples
                WHERE lineage_id = ${lineageId} AND position >= ${from} AND position < ${to}
                ORDER BY position LIMIT ${EXPORT_PAGE_ROWS}
              ) rows
            ) sized
            WHERE bytes_before < ${EXPORT_PAGE_BYTES}
          )
          ORDER BY position
        `)
        )

      /**
       * Lines `from` to `to` (exclusive): a page's short lines as a chunk, a
       * long line as a chunk per piece. A missing row ends the body with a
       * defect: the connection is cut, never a short body that looks complete.
       */
      const lines = (orgId: string, lineageId: string, from: number, to: number): Stream.Stream<Uint8Array> => {
        type At = { readonly next: number; readonly long?: { readonly offset: number; readonly bytes: number } }
        const missing = (position: number) =>
          Effect.die(new Error(`dataset line ${lineageId} has no example at position ${position}`))
        const after = (next: number) => next < to ? Option.some<At>({ next }) : Option.none<At>()
        return Stream.paginate({ next: from } as At, (at: At) => {
          if (at.next >= to) return Effect.succeed([[], Option.none<At>()] as const)
          const long = at.long
          if (long !== undefined) {
            return Effect.flatMap(piece(orgId, lineageId, at.next, long.offset), (bytes) => {
              if (bytes === undefined || bytes.length === 0) return missing(at.next)
              const offset = long.offset + EXPORT_PIECE_BYTES
              return Effect.succeed(
                offset < long.bytes
                  ? [[bytes], Option.some<At>({ next: at.next, long: { offset, bytes: long.bytes } })] as const
                  : [[bytes, NEWLINE], after(at.next + 1)] as const
              )
            })
          }
          return Effect.flatMap(page(orgId, lineageId, at.next, to), (rows) => {
            const last = rows[rows.length - 1]
            if (last === undefined || rows[0]!.position !== at.next || last.position !== at.next + rows.length - 1) {
              return missing(at.next)
            }
            // The short lines before the first long one; the long one is read next, in pieces.
            const cut = rows.findIndex((row) => row.line === null)
            const short = cut === -1 ? rows : rows.slice(0, cut)
            const chunks = short.length === 0 ? [] : [chunkOf(short)]
            return Effect.succeed(
              cut === -1
                ? [chunks, after(last.position + 1)] as const
                : [
                  chunks,
                  Option.some<At>({ next: rows[cut]!.position, long: { offset: 0, bytes: rows[cut]!.line_bytes } })
                ] as const
            )
          })
        })
      }

      // A claim lasts two statements' time past its last renewal: a page
      // never holds it longer than one, so only a stopped export lets it lapse.
      const leaseMs = 2 * Duration.toMillis(config.dbStatementTimeout)
      const claim = (datasetId: string) =>
        Effect.map(
          sql`
            UPDATE datasets SET export_claim_until = now() + ${leaseMs}::integer * interval '1 millisecond'
            WHERE id = ${datasetId} AND export_sha256 IS NULL AND (export_claim_until IS NULL OR export_claim_until < now())
            RETURNING id
          `,
          (rows) => rows.length > 0
        )
      const renew = (datasetId: string) =>
        sql`UPDATE datasets SET export_claim_until = now() + ${leaseMs}::integer * interval '1 millisecond' WHERE id = ${datasetId} AND export_sha256 IS NULL`
      const unclaim = (datasetId: string) =>
        sql`UPDATE datasets SET export_claim_until = NULL WHERE id = ${datasetId} AND export_sha256 IS NULL`

      /** The checksum and size of the whole export: one paged pass over the version, under this export's claim. */
      const measure = Effect.fn("DatasetExport.measure")(
        function*(orgId: string, datasetId: string, lineageId: string, count: number) {
          const hash = crypto.createHash("sha256")
          let renewedAt = yield* Clock.currentTimeMillis
          const bytes = yield* Stream.runFoldEffect(
            lines(orgId, lineageId, 0, count),
            () => 0,
            (total, chunk) =>
              Effect.gen(function*() {
                hash.update(chunk)
                const now = yield* Clock.currentTimeMillis
                if (now - renewedAt >= leaseMs / 4) {
                  renewedAt = now
                  yield* renew(datasetId)
                }
                return total + chunk.byteLength
              })
          )
          const sha256 = hash.digest("base64")
          yield* sql`
          UPDATE datasets SET export_sha256 = ${sha256}, export_bytes = ${bytes}, export_claim_until = NULL
          WHERE id = ${datasetId} AND export_sha256 IS NULL
        `
          return { sha256, bytes }
        }
      )

      /**
       * The stored checksum and size, measured by this export when no other
       * is measuring the version; otherwise waited for, polling, and taken
       * over should the other export's claim lapse.
       */
      const measured = (orgId: string, datasetId: string, lineageId: string, count: number) =>
        Effect.gen(function*() {
          while (true) {
            if (yield* claim(datasetId)) {
              return yield* measure(orgId, datasetId, lineageId, count).pipe(
                Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : Effect.ignore(unclaim(datasetId)))
              )
            }
            const stored = yield* DigestRows.one(
              sql`SELECT export_sha256, export_bytes FROM datasets WHERE id = ${datasetId}`
            )
            if (stored?.export_sha256 != null && stored.export_bytes !== null) {
              return { sha256: stored.export_sha256, bytes: Number(stored.export_bytes) }
            }
            yield* Effect.sleep(CLAIM_POLL)
          }
        }).pipe(Effect.orDie)

      const open = Effect.fn("DatasetExport.open")(function*(orgId: string, datasetId: string, after: number) {
        const version = yield* VersionRows.one(sql`
          SELECT version, lineage_id, example_count, export_sha256, export_bytes FROM datasets
          WHERE id = ${datasetId} AND org_id = ${orgId}
        `)
        if (version === undefined) return yield* new NotFound({ detail: "No such dataset." })
        if (after > version.example_count) {
          return yield* new InvalidRequest({
            field: "after",
            detail: `after is past the version's last line: it has ${version.example_count} examples.`
          })
        }
        const { sha256, bytes } = version.export_sha256 !== null && version.export_bytes !== null
          ? { sha256: version.export_sha256, bytes: Number(version.export_bytes) }
          : yield* measured(orgId, datasetId, version.lineage_id, version.example_count)
        return {
          version: version.version,
          sha256,
          bytes,
          lines: version.example_count,
          body: lines(orgId, version.lineage_id, after, version.example_count)
        }
      })

      return DatasetExport.of({ open })
    })
  )
}
