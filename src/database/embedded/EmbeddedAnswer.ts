/**
 * PGlite's answer to one statement, read from its raw protocol bytes.
 *
 * `execProtocolStream` parses every message of the answer into an object
 * with PGlite's generic protocol parser (ParseComplete, BindComplete,
 * ReadyForQuery included), and `parseResults` then walks those objects into
 * rows. svc needs the rows, the command tag and the first error only, so
 * the worker takes the raw bytes (`execProtocolRawStream`) and reads them
 * here in one pass, with the same text parsers and the same shapes
 * `parseResults` gives (rows as objects by column name, or as arrays;
 * `command` the tag's first word; `affectedRows` the count of an INSERT,
 * UPDATE, DELETE, COPY or MERGE; an `ErrorResponse` as PGlite's
 * `DatabaseError` fields). Notices and notifications are ignored, as the
 * worker ignored them before.
 *
 * Speeds up: the database thread's fixed cost per statement: with the
 * write-through skip (`EmbeddedWriteThrough.ts`), a near-empty statement
 * 78 to 48 µs of that thread (`bench/inprocess/round-trip.ts`, figures in
 * bench/notes/embedded.md).
 */

/** A column of a `RowDescription`: its name and type. */
export interface Column {
  readonly name: string
  readonly type: number
}

export interface Answer {
  /** The statement's columns, when the answer described them. */
  readonly columns: ReadonlyArray<Column> | undefined
  readonly rows: Array<unknown>
  readonly command: string | undefined
  readonly affectedRows: number
  /** The first `ErrorResponse`: PostgreSQL's fields by PGlite's `DatabaseError` names. */
  readonly error: (Error & Record<string, unknown>) | undefined
}

type Parsers = Record<number | string, ((value: string, typeId?: number) => unknown) | undefined>

/** `ErrorResponse` field codes, by the names PGlite's `DatabaseError` gives them. */
const ERROR_FIELDS: Record<string, string> = {
  S: "severity",
  C: "code",
  D: "detail",
  H: "hint",
  P: "position",
  p: "internalPosition",
  q: "internalQuery",
  W: "where",
  s: "schema",
  t: "table",
  c: "column",
  d: "dataType",
  n: "constraint",
  F: "file",
  L: "line",
  R: "routine"
}

/** As `Object.fromEntries` sets it: a column named `__proto__` is a column, not the prototype. */
const setColumn = (row: Record<string, unknown>, name: string, value: unknown) => {
  if (name === "__proto__") {
    Object.defineProperty(row, name, { value, enumerable: true, writable: true, configurable: true })
  } else row[name] = value
}

const cstringEnd = (bytes: Buffer, at: number) => {
  const end = bytes.indexOf(0, at)
  return end < 0 ? bytes.length : end
}

const readColumns = (bytes: Buffer, at: number): Array<Column> => {
  const count = bytes.readInt16BE(at)
  at += 2
  const columns: Array<Column> = new Array(count)
  for (let i = 0; i < count; i++) {
    const end = cstringEnd(bytes, at)
    const name = bytes.toString("utf8", at, end)
    at = end + 1
    // table oid (4), column number (2), then the type oid.
    const type = bytes.readInt32BE(at + 6)
    // type oid (4), type size (2), type modifier (4), format (2).
    at += 4 + 2 + 4 + 2 + 4 + 2
    columns[i] = { name, type }
  }
  return columns
}

const readError = (bytes: Buffer, at: number, end: number): Error & Record<string, unknown> => {
  const fields: Record<string, string> = {}
  let message = ""
  while (at < end && bytes[at] !== 0) {
    const code = String.fromCharCode(bytes[at]!)
    const stop = cstringEnd(bytes, at + 1)
    const value = bytes.toString("utf8", at + 1, stop)
    if (code === "M") message = value
    else if (ERROR_FIELDS[code] !== undefined) fields[ERROR_FIELDS[code]] = value
    at = stop + 1
  }
  return Object.assign(new Error(message), { name: "error" }, fields)
}

/**
 * Reads the answer in `bytes`. `described` is the statement's columns when
 * the answer does not describe them (a prepared statement's later runs).
 * Stops at the first `CommandComplete`: one statement, one result.
 */
export const readAnswer = (
  bytes: Buffer,
  parsers: Parsers,
  arrays: boolean,
  described: ReadonlyArray<Column> | undefined
): Answer => {
  let columns = described
  let describedHere: Array<Column> | undefined
  const rows: Array<unknown> = []
  let command: string | undefined
  let affectedRows = 0
  let error: (Error & Record<string, unknown>) | undefined
  let at = 0
  while (at + 5 <= bytes.length) {
    const kind = bytes[at]!
    const end = at + 1 + bytes.readInt32BE(at + 1)
    const body = at + 5
    if (kind === 0x44 /* D: DataRow */ && error === undefined && command === undefined) {
      const count = bytes.readInt16BE(body)
      let p = body + 2
      const row: Array<unknown> | Record<string, unknown> = arrays ? new Array(count) : {}
      for (let i = 0; i < count; i++) {
        const length = bytes.readInt32BE(p)
        p += 4
        const column = columns?.[i]
        let value: unknown = null
        if (length >= 0) {
          const text = bytes.toString("utf8", p, p + length)
          p += length
          const parse = column === undefined ? undefined : parsers[column.type]
          value = parse === undefined ? text : parse(text, column!.type)
        }
        if (arrays) (row as Array<unknown>)[i] = value
        else setColumn(row as Record<string, unknown>, column?.name ?? String(i), value)
      }
      rows.push(row)
    } else if (kind === 0x54 /* T: RowDescription */) {
      describedHere = readColumns(bytes, body)
      if (command === undefined) columns = describedHere
    } else if (kind === 0x43 /* C: CommandComplete */ && command === undefined && error === undefined) {
      const tag = bytes.toString("utf8", body, cstringEnd(bytes, body))
      const parts = tag.split(" ")
      command = parts[0]
      const count = parseInt(parts[parts.length - 1]!, 10)
      if (
        command === "INSERT" || command === "UPDATE" || command === "DELETE" || command === "COPY" ||
        command === "MERGE"
      ) {
        affectedRows = count
      }
    } else if (kind === 0x45 /* E: ErrorResponse */ && error === undefined) {
      error = readError(bytes, body, end)
    }
    at = end
  }
  return { columns: describedHere, rows, command, affectedRows, error }
}

/**
 * Collects the chunks PGlite hands `onRawData` during one call (views of
 * its memory, valid only during the callback) and joins them.
 */
export class AnswerBytes {
  private chunks: Array<Buffer> = []
  readonly onRawData = (chunk: Uint8Array): void => {
    this.chunks.push(Buffer.from(chunk))
  }
  /** The bytes collected since the last `take`. */
  take(): Buffer {
    const chunks = this.chunks
    this.chunks = []
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
  }
}
