/**
 * `db dump` on the embedded database: its data as SQL that `psql` loads into
 * a PostgreSQL server whose schema svc's migrations made (the same schema:
 * one set of migrations). The output is what `pg_dump --data-only` writes:
 * `COPY ... FROM stdin` blocks in PostgreSQL's text format, then the
 * sequences, all in one transaction that first empties the tables it
 * fills. Runs in the database worker (`embedded-worker.ts`), on PGlite's
 * own `COPY ... TO '/dev/blob'`.
 */
import type { PGlite } from "@electric-sql/pglite"

const ident = (name: string) => `"${name.replace(/"/g, "\"\"")}"`
const literal = (text: string) => `'${text.replace(/'/g, "''")}'`

/** Tables in an order where each comes after those its foreign keys name (cycles: as found). */
const ordered = (tables: ReadonlyArray<string>, edges: ReadonlyArray<{ from: string; to: string }>) => {
  const out: Array<string> = []
  const seen = new Set<string>()
  const visiting = new Set<string>()
  const visit = (table: string) => {
    if (seen.has(table) || visiting.has(table)) return
    visiting.add(table)
    for (const edge of edges) if (edge.from === table && edge.to !== table) visit(edge.to)
    visiting.delete(table)
    seen.add(table)
    out.push(table)
  }
  for (const table of tables) visit(table)
  return out
}

export const dumpData = async (db: PGlite): Promise<string> => {
  const tables = (await db.query<{ name: string }>(`
    SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
    ORDER BY c.relname`)).rows.map((row) => row.name)
  const edges = (await db.query<{ from: string; to: string }>(`
    SELECT c.relname AS "from", r.relname AS "to" FROM pg_constraint k
    JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class r ON r.oid = k.confrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE k.contype = 'f' AND n.nspname = 'public'`)).rows
  const parts: Array<string> = [
    "-- svc: data of the embedded database, for psql on a PostgreSQL server migrated by svc",
    "-- (the same as pg_dump --data-only). Load with: psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -f dump.sql",
    "SET client_encoding = 'UTF8';",
    "SET standard_conforming_strings = on;",
    "BEGIN;"
  ]
  const order = ordered(tables, edges)
  if (order.length > 0) parts.push(`TRUNCATE ${order.map((t) => `public.${ident(t)}`).join(", ")};`)
  for (const table of order) {
    const columns = (await db.query<{ name: string }>(
      `
      SELECT a.attname AS name FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'public' AND c.relname = $1 AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
      ORDER BY a.attnum`,
      [table]
    )).rows.map((row) => ident(row.name))
    const list = columns.join(", ")
    const copied = await db.query(`COPY (SELECT ${list} FROM public.${ident(table)}) TO '/dev/blob'`)
    const data = copied.blob === undefined ? "" : await copied.blob.text()
    parts.push(`COPY public.${ident(table)} (${list}) FROM stdin;\n${data}\\.`)
  }
  const sequences = (await db.query<{ name: string; last: string | null; called: boolean }>(`
    SELECT s.relname AS name, q.last_value::text AS last, q.last_value IS NOT NULL AS called
    FROM pg_class s JOIN pg_namespace n ON n.oid = s.relnamespace
    JOIN pg_sequences q ON q.schemaname = n.nspname AND q.sequencename = s.relname
    WHERE s.relkind = 'S' AND n.nspname = 'public' ORDER BY s.relname`)).rows
  for (const sequence of sequences) {
    if (sequence.last !== null) {
      parts.push(`SELECT pg_catalog.setval(${literal(`public.${ident(sequence.name)}`)}, ${sequence.last}, true);`)
    }
  }
  parts.push("COMMIT;", "")
  return parts.join("\n")
}
