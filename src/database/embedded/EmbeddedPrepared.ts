/**
 * Named prepared statements on the embedded database, as `@effect/sql-pg`
 * keeps them on a PostgreSQL server: a statement is parsed (and its columns
 * described) the first time it runs; afterwards it is only bound and
 * executed under its name, so PostgreSQL neither parses, analyses and
 * rewrites its text again nor describes its columns, and may keep a generic
 * plan. Without it every statement on PGlite was planned from its text
 * each time (the server's PostgreSQL was not).
 *
 * Speeds up: the database thread's CPU per statement, most where the
 * text is long. `bench/profile-writes.ts` on PGlite, 3 000 requests at
 * concurrency 16, two interleaved rounds each (load average 4 to 15):
 * database thread per pending governed step (one statement of
 * data-modifying CTEs, 3 KB of SQL) 2 727 / 2 813 → 1 310 / 847 µs, per
 * allowed step 1 383 / 1 493 → 480 / 507 µs, per agent session POST
 * 620 / 600 → 367 / 300 µs; `bench/inprocess/embedded-statement.ts`: a
 * SELECT by key 156 → 61 µs, an INSERT 140 → 89 µs (load average 3).
 *
 * The rules it keeps (those of `@effect/sql-pg`'s `PreparedCache`):
 * - A statement is keyed by its text and the types of its parameters: the
 *   same text with differently typed parameters is another statement.
 * - The cache is bounded and evicts the least recently used statement; an
 *   evicted name is closed by a `Close` that rides with the next statement
 *   (closing a name PostgreSQL does not hold is not an error).
 * - A statement whose run failed is dropped and its name closed: its Parse
 *   may or may not have completed, its plan may have gone stale (a table it
 *   reads was altered). The next run parses it again under a new name.
 */
import { randomBytes } from "node:crypto"
import { encodeClose, encodeStatement, type Prepared, type PreparedCache } from "./EmbeddedProtocol.ts"

/** How many statements the embedded session keeps prepared. */
const PREPARED_STATEMENTS = 256

export class PreparedStatements implements PreparedCache {
  private readonly statements = new Map<string, Prepared>()
  private closes: Array<string> = []
  private counter = 0
  /** Names of one cache never meet another's on the same session. */
  private readonly namespace = randomBytes(4).toString("hex")
  private readonly max: number
  constructor(max = PREPARED_STATEMENTS) {
    this.max = max
  }

  /** The statement for `sql` with parameters of `types`, most recently used from now on. */
  get(sql: string, types: ReadonlyArray<number>): Prepared {
    const key = types.length === 0 ? sql : `${sql}\u0000${types.join(",")}`
    const found = this.statements.get(key)
    if (found !== undefined) {
      this.statements.delete(key)
      this.statements.set(key, found)
      return found
    }
    const prepared: Prepared = { name: `svc_${this.namespace}_${++this.counter}`, key, description: undefined }
    this.statements.set(key, prepared)
    while (this.statements.size > this.max) {
      const [oldest] = this.statements.values()
      this.statements.delete(oldest!.key)
      if (oldest!.description !== undefined) this.closes.push(oldest!.name)
    }
    return prepared
  }

  /** Forgets a statement whose run failed; its name is closed with the next statement. */
  failed(prepared: Prepared): void {
    if (this.statements.get(prepared.key) === prepared) this.statements.delete(prepared.key)
    this.closes.push(prepared.name)
  }

  /**
   * The messages of one run of `prepared`: owed Closes, then Parse and
   * Describe the first time, else only Bind, Execute and Sync.
   */
  encode(
    prepared: Prepared,
    sql: string,
    values: ReadonlyArray<string | null>,
    types: ReadonlyArray<number>
  ): Uint8Array {
    const first = prepared.description === undefined
    const statement = encodeStatement(sql, values, types, { name: prepared.name, parse: first, describe: first })
    if (this.closes.length === 0) return statement
    const closes = this.closes.map((name) => encodeClose(name))
    this.closes = []
    return Buffer.concat([...closes, statement])
  }

  /** How many statements are held (tests). */
  get size(): number {
    return this.statements.size
  }
}
