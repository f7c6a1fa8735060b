/**
 * Every table has one owner: the folder of src/ whose statements write it
 * (INSERT, UPDATE, DELETE, COPY, TRUNCATE). Every rule about a table's rows
 * is then read in one folder; others get statement pieces from the owner
 * (as the outbox gives `events` to the step's statement) or call it.
 * Migrations (the tables' definitions and triggers) are the exception.
 *
 * The tables are the migrations' (`CREATE TABLE`, less those dropped or
 * renamed since); a table a migration adds without an owner here fails the
 * first test. A statement that names its table at run time
 * (`DELETE FROM ${sql(table)}`) writes every table its file names in a
 * string.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const src = path.join(import.meta.dirname, "../../../src")
const migrations = path.join(src, "database", "migrations")

const OWNERS: Record<string, string> = {
  orgs: "identity",
  api_keys: "identity",
  console_links: "console",
  console_sessions: "console",
  tasks: "tasks",
  runs: "tasks",
  datasets: "tasks",
  dataset_examples: "feedback",
  feedback: "feedback",
  agent_sessions: "agents",
  agent_steps: "agents",
  session_events: "agents",
  approvals: "approvals",
  approval_votes: "approvals",
  approval_policies: "approvals",
  approval_mail_links: "approvals",
  approval_stream_events: "approvals",
  reviewer_groups: "approvals",
  reviewer_group_members: "approvals",
  reviewer_delegations: "approvals",
  reviewer_member_addresses: "approvals",
  notification_settings: "approvals",
  reviewer_confirmations: "notifications",
  notification_endpoints: "notifications",
  events: "outbox",
  mcp_servers: "mcp",
  mcp_sessions: "mcp",
  mcp_calls: "mcp",
  event_dispatch: "outbox",
  deliveries: "deliveries",
  delivery_attempts: "deliveries",
  delivery_outcomes: "deliveries",
  delivery_targets: "deliveries",
  telemetry_destinations: "telemetry",
  org_secrets: "secrets",
  org_usage: "platform",
  org_rate_limits: "platform",
  idempotency_keys: "idempotency",
  svc_schema_versions: "database"
}

const filesOf = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? filesOf(path.join(dir, entry.name))
      : entry.name.endsWith(".ts")
      ? [path.join(dir, entry.name)]
      : []
  )

/** The tables the migrations leave: created, less dropped, renamed to their new name. */
const migratedTables = (texts: ReadonlyArray<string>) => {
  const tables = new Set<string>()
  const change =
    /\bCREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_]+)|\bALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?([a-z_]+)\s+RENAME\s+TO\s+([a-z_]+)|\bDROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?([a-z_]+)/gi
  for (const text of texts) {
    for (const [, created, renamed, to, dropped] of text.matchAll(change)) {
      if (created !== undefined) tables.add(created)
      if (renamed !== undefined && tables.delete(renamed)) tables.add(to!)
      if (dropped !== undefined) tables.delete(dropped)
    }
  }
  return tables
}

const WRITE = /\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM|COPY|TRUNCATE(?:\s+TABLE)?)\s+(?:ONLY\s+)?([a-z_]+)\b/gi
const DYNAMIC_WRITE = /\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM|COPY|TRUNCATE(?:\s+TABLE)?)\s+\$\{/i

/** `folder/File.ts: table` for each write of a table by a file outside its owner's folder. */
const strayWrites = (
  files: ReadonlyArray<{ readonly file: string; readonly text: string }>,
  tables: ReadonlySet<string>
) =>
  files.flatMap(({ file, text }) => {
    const folder = file.split("/")[0]!
    const written = new Set([...text.matchAll(WRITE)].map((m) => m[1]!.toLowerCase()).filter((t) => tables.has(t)))
    if (DYNAMIC_WRITE.test(text)) {
      for (const m of text.matchAll(/"([a-z_]+)"/g)) if (tables.has(m[1]!)) written.add(m[1]!)
    }
    return [...written].filter((table) => OWNERS[table] !== folder).map((table) =>
      `${file}: ${table} (owned by ${OWNERS[table] ?? "nobody"})`
    )
  })

const sources = () =>
  filesOf(src)
    .filter((file) => !file.startsWith(migrations))
    .map((file) => ({ file: path.relative(src, file).split(path.sep).join("/"), text: fs.readFileSync(file, "utf8") }))

describe("one owner for every table", () => {
  const tables = migratedTables(filesOf(migrations).sort().map((file) => fs.readFileSync(file, "utf8")))

  it("every table the migrations leave has an owner, and every owner is a folder of src/", () => {
    assert.isAbove(tables.size, 30, "the scan finds the tables")
    assert.deepStrictEqual([...tables].filter((table) => OWNERS[table] === undefined).sort(), [])
    assert.deepStrictEqual(Object.keys(OWNERS).filter((table) => !tables.has(table)).sort(), [])
    for (const folder of new Set(Object.values(OWNERS))) {
      assert.isTrue(fs.statSync(path.join(src, folder)).isDirectory(), folder)
    }
  })

  it("no statement outside a table's owner (and the migrations) writes it", () => {
    assert.deepStrictEqual(strayWrites(sources(), tables), [])
  })

  it("the check sees a write from elsewhere, a table named at run time, and not a table whose name only starts alike", () => {
    const known = new Set(["events", "approvals", "session_events"])
    const stray = (text: string) => strayWrites([{ file: "agents/A.ts", text }], known)
    assert.deepStrictEqual(stray("  INSERT INTO events (id) VALUES (1)"), ["agents/A.ts: events (owned by outbox)"])
    assert.deepStrictEqual(stray("UPDATE approvals SET status = 'x'"), ["agents/A.ts: approvals (owned by approvals)"])
    assert.deepStrictEqual(stray("delete from approvals where id = 1"), ["agents/A.ts: approvals (owned by approvals)"])
    assert.deepStrictEqual(stray("INSERT INTO session_events (id) VALUES (1)"), [])
    assert.deepStrictEqual(stray("SELECT 1 FROM events FOR UPDATE"), [])
    assert.deepStrictEqual(stray("const t = \"approvals\"\nsql`DELETE FROM ${sql(t)} WHERE x`"), [
      "agents/A.ts: approvals (owned by approvals)"
    ])
    assert.deepStrictEqual(
      [...migratedTables([
        "CREATE TABLE a (x int)",
        "CREATE TABLE IF NOT EXISTS b ()",
        "ALTER TABLE a RENAME TO c; CREATE TABLE a ()",
        "DROP TABLE IF EXISTS b"
      ])],
      ["c", "a"]
    )
  })
})
