/**
 * The CLI's commands, run by `npm run cli` in its own process or, while a
 * server holds the embedded data directory, by that server on its admin
 * channel (`src/server/AdminChannel.ts`): the same handlers either way.
 *
 *   db query "SELECT ..." --json
 *   db dump > svc.sql
 *
 *   orgs create --name acme --json
 *   orgs list --json
 *   orgs delete --id <org id> --json
 *   keys create --org <org id> --scopes tasks.write,tasks.read [--name ci] --json
 *   keys list --org <org id> --json
 *   keys revoke --id <key id> --json
 *   notifications reviewer-email --org <org id> (--email reviewers@example.com | --clear) --json
 *   console login --org <org id> --preset reviewer|approver|admin --name "Ada" [--ttl 15m] --json
 *   console sessions --org <org id> --json
 *   console revoke (--session <session id> | --all --org <org id>) --json
 */
import { Console, Data, Duration, Effect, Option, Schema } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { CliError } from "effect/cli"
import { ConsolePresetNames, Scopes, type ScopeName } from "../api/Security.ts"
import {
  ConsoleSessions,
  DEFAULT_LINK_TTL_SECONDS,
  MAX_LINK_TTL_SECONDS,
  validPerson
} from "../console/ConsoleSessions.ts"
import { Identity } from "../identity/Identity.ts"
import { writeReviewerEmail } from "../notifications/ReviewerAddress.ts"
import { parseDurations, SvcConfig } from "../platform/Config.ts"
import { DatabaseInfo } from "../platform/Database.ts"
import { SqlClient } from "effect/sql"

const json = Flag.Boolean("json").pipe(Flag.withDescription("Print one JSON object"), Flag.withDefault(false))

const Uuid = Schema.String.check(Schema.isUUID(undefined, { message: "Expected an id (UUID)" }))

const fail = (message: string) => Effect.fail(new CliError.UserError({ cause: new Error(message), userMessage: message }))

const print = (asJson: boolean, value: unknown, text: string) => Console.log(asJson ? JSON.stringify(value) : text)

const orgsCreate = Command.make(
  "create",
  { name: Flag.String("name").pipe(Flag.withDescription("Organization name"), Flag.withSchema(Schema.NonEmptyString)), json },
  Effect.fn(function*({ name, json }) {
    const identity = yield* Identity
    const org = yield* identity.createOrg(name)
    yield* print(json, org, `created organization ${org.id} (${org.name})`)
  })
).pipe(Command.withDescription("Create an organization"))

const orgsList = Command.make(
  "list",
  { json },
  Effect.fn(function*({ json }) {
    const identity = yield* Identity
    const orgs = yield* identity.listOrgs
    yield* print(json, { orgs }, orgs.map((org) => `${org.id}  ${org.name}`).join("\n") || "no organizations")
  })
).pipe(Command.withDescription("List organizations"))

const orgsDelete = Command.make(
  "delete",
  { id: Flag.String("id").pipe(Flag.withDescription("Organization id"), Flag.withSchema(Uuid)), json },
  Effect.fn(function*({ id, json }) {
    const identity = yield* Identity
    const { keys } = yield* identity.deleteOrg(id).pipe(Effect.catchTag("OrgNotFound", () => fail(`no organization ${id}`)))
    yield* print(json, { id, deleted: true, keys }, `deleted organization ${id} and all its data (${keys} API key(s) refused from now on)`)
  })
).pipe(Command.withDescription("Delete an organization and every row of its data, in one transaction; its keys are refused at once"))

const orgs = Command.make("orgs").pipe(
  Command.withDescription("Manage organizations"),
  Command.withSubcommands([orgsCreate, orgsList, orgsDelete])
)

const parseScopes = (raw: string) => {
  const scopes = raw.split(",").map((scope) => scope.trim()).filter((scope) => scope.length > 0)
  const unknown = scopes.filter((scope) => !(Scopes as ReadonlyArray<string>).includes(scope))
  if (scopes.length === 0) return fail("--scopes needs at least one scope")
  if (unknown.length > 0) {
    return fail(`unknown scope ${unknown.join(", ")}; known scopes: ${Scopes.join(", ")}`)
  }
  return Effect.succeed(scopes as Array<ScopeName>)
}

const keysCreate = Command.make(
  "create",
  {
    org: Flag.String("org").pipe(Flag.withDescription("Organization id"), Flag.withSchema(Uuid)),
    scopes: Flag.String("scopes").pipe(Flag.withDescription(`Comma-separated scopes: ${Scopes.join(", ")}`)),
    name: Flag.String("name").pipe(Flag.withDescription("A label for the key"), Flag.optional),
    json
  },
  Effect.fn(function*({ org, scopes, name, json }) {
    const identity = yield* Identity
    const parsed = yield* parseScopes(scopes)
    const created = yield* identity.createKey({ orgId: org, scopes: parsed, name: Option.getOrUndefined(name) }).pipe(
      Effect.catchTag("OrgNotFound", () => fail(`no organization ${org}`))
    )
    yield* print(
      json,
      { id: created.id, org_id: created.org_id, key: created.key, scopes: created.scopes },
      `created key ${created.id}\n${created.key}\n(shown only now: store it safely)`
    )
  })
).pipe(Command.withDescription("Create an API key; the key is printed only now"))

const keysList = Command.make(
  "list",
  { org: Flag.String("org").pipe(Flag.withDescription("Organization id"), Flag.withSchema(Uuid)), json },
  Effect.fn(function*({ org, json }) {
    const identity = yield* Identity
    const keys = yield* identity.listKeys(org).pipe(Effect.catchTag("OrgNotFound", () => fail(`no organization ${org}`)))
    yield* print(
      json,
      { keys },
      keys.map((key) =>
        `${key.id}  ${key.key_prefix}…  ${key.scopes.join(",")}${key.revoked_at ? `  revoked ${key.revoked_at}` : ""}`
      ).join("\n") || "no keys"
    )
  })
).pipe(Command.withDescription("List an organization's keys (never the key material)"))

const keysRevoke = Command.make(
  "revoke",
  { id: Flag.String("id").pipe(Flag.withDescription("Key id"), Flag.withSchema(Uuid)), json },
  Effect.fn(function*({ id, json }) {
    const identity = yield* Identity
    const key = yield* identity.revokeKey(id).pipe(Effect.catchTag("KeyNotFound", () => fail(`no key ${id}`)))
    yield* print(json, key, `revoked key ${key.id}`)
  })
).pipe(Command.withDescription("Revoke an API key at once"))

const keys = Command.make("keys").pipe(
  Command.withDescription("Manage API keys"),
  Command.withSubcommands([keysCreate, keysList, keysRevoke])
)

const emailPattern = /^[^\s@<>",;:()\\[\]]+@[^\s@<>",;:()\\[\]]+\.[^\s@<>",;:()\\[\]]+$/

const reviewerEmail = Command.make(
  "reviewer-email",
  {
    org: Flag.String("org").pipe(Flag.withDescription("Organization id"), Flag.withSchema(Uuid)),
    email: Flag.String("email").pipe(Flag.withDescription("Reviewer address for approval requests and deadline notices"), Flag.optional),
    clear: Flag.Boolean("clear").pipe(Flag.withDescription("Remove the reviewer address"), Flag.withDefault(false)),
    json
  },
  Effect.fn(function*({ org, email, clear, json }) {
    if (clear === Option.isSome(email)) return yield* fail("give exactly one of --email ADDRESS or --clear")
    const address = Option.getOrNull(email)
    if (address !== null && (address.length > 254 || !emailPattern.test(address))) {
      return yield* fail(`not an email address: ${address}`)
    }
    const found = yield* writeReviewerEmail(org, address)
    if (!found) return yield* fail(`no organization ${org}`)
    yield* print(
      json,
      { org_id: org, reviewer_email: address },
      address === null ? `cleared the reviewer address of ${org}` : `reviewer address of ${org}: ${address}`
    )
  })
).pipe(Command.withDescription("Set or clear the organization's reviewer email address (mailed when SVC_SMTP_URL is set); an address the operator sets needs no confirmation"))

const notifications = Command.make("notifications").pipe(
  Command.withDescription("Notification settings"),
  Command.withSubcommands([reviewerEmail])
)

const orgFlag = Flag.String("org").pipe(Flag.withDescription("Organization id"), Flag.withSchema(Uuid))

/** `15m`, `1h`...: between a minute and `MAX_LINK_TTL_SECONDS`. */
const parseTtl = (raw: string) =>
  Effect.gen(function*() {
    const parsed = yield* parseDurations("--ttl", raw).pipe(Effect.catch(() => fail(`--ttl: "${raw}" is not a duration such as 15m or 1h`)))
    const seconds = parsed.length === 1 ? Math.round(Duration.toMillis(parsed[0]!) / 1000) : Number.NaN
    if (!(seconds >= 60 && seconds <= MAX_LINK_TTL_SECONDS)) {
      return yield* fail(`--ttl must be one duration between 1m and ${MAX_LINK_TTL_SECONDS / 3600}h`)
    }
    return seconds
  })

const consoleLogin = Command.make(
  "login",
  {
    org: orgFlag,
    preset: Flag.Literals("preset", ConsolePresetNames).pipe(Flag.withDescription("What the person may do: reviewer, approver or admin")),
    name: Flag.String("name").pipe(Flag.withDescription("The person's name, as records will name them (console:<name>)")),
    ttl: Flag.String("ttl").pipe(Flag.withDescription("How long the link works (default 15m, at most 24h)"), Flag.optional),
    json
  },
  Effect.fn(function*({ org, preset, name, ttl, json }) {
    if (!validPerson(name)) return yield* fail("--name must be 1 to 100 printable characters")
    const ttlSeconds = Option.isSome(ttl) ? yield* parseTtl(ttl.value) : DEFAULT_LINK_TTL_SECONDS
    const config = yield* SvcConfig
    const sessions = yield* ConsoleSessions
    const link = yield* sessions.createLink({ orgId: org, preset, person: name.trim(), ttlSeconds }).pipe(
      Effect.catchTag("OrgNotFound", () => fail(`no organization ${org}`))
    )
    const host = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host.includes(":") ? `[${config.host}]` : config.host
    const base = Option.getOrElse(config.publicUrl, () => `http://${host}:${config.port}`)
    // The secret is in the fragment: browsers never send it, so it never reaches a server log.
    const url = `${base}/console/sign-in#${link.token}`
    yield* print(
      json,
      { url, expires_at: link.expiresAt, preset },
      `${url}\n(works once, until ${link.expiresAt}; the person presses "Sign in" on the page it opens)`
    )
  })
).pipe(Command.withDescription("Print a one-time console sign-in link for a person"))

const consoleSessions = Command.make(
  "sessions",
  { org: orgFlag, json },
  Effect.fn(function*({ org, json }) {
    const sessions = yield* ConsoleSessions
    const list = yield* sessions.list(org)
    yield* print(
      json,
      { sessions: list },
      list.map((s) => `${s.id}  ${s.preset}  ${s.person}  last seen ${s.last_seen_at}  ends by ${s.expires_at}`).join("\n") ||
        "no console sessions"
    )
  })
).pipe(Command.withDescription("List an organization's console sessions that have not ended"))

const consoleRevoke = Command.make(
  "revoke",
  {
    session: Flag.String("session").pipe(Flag.withDescription("Console session id"), Flag.withSchema(Uuid), Flag.optional),
    all: Flag.Boolean("all").pipe(Flag.withDescription("Every session of --org"), Flag.withDefault(false)),
    org: Flag.String("org").pipe(Flag.withDescription("Organization id (with --all)"), Flag.withSchema(Uuid), Flag.optional),
    json
  },
  Effect.fn(function*({ session, all, org, json }) {
    const sessions = yield* ConsoleSessions
    if (all === Option.isSome(session)) return yield* fail("give exactly one of --session ID or --all --org ORG_ID")
    if (Option.isSome(session)) {
      yield* sessions.revoke(session.value).pipe(Effect.catchTag("SessionNotFound", () => fail(`no console session ${session.value}`)))
      return yield* print(json, { revoked: 1, session_id: session.value }, `revoked console session ${session.value}`)
    }
    if (Option.isNone(org)) return yield* fail("--all needs --org ORG_ID")
    const count = yield* sessions.revokeAll(org.value)
    yield* print(json, { revoked: count, org_id: org.value }, `revoked ${count} console session(s) of ${org.value}`)
  })
).pipe(Command.withDescription("End console sessions at once, in every process"))

const consoleCommand = Command.make("console").pipe(
  Command.withDescription("The web console: sign-in links and sessions"),
  Command.withSubcommands([consoleLogin, consoleSessions, consoleRevoke])
)

/** JSON with bigints as strings and dates as ISO text. */
const toJson = (value: unknown) => JSON.stringify(value, (_, v) => typeof v === "bigint" ? v.toString() : v instanceof Uint8Array ? Buffer.from(v).toString("hex") : v)

/** How long `db query` may run on a PostgreSQL server. */
export const QUERY_TIMEOUT = "5s"

/** Carries the rows out of the transaction, which it rolls back. */
class RolledBack extends Data.TaggedError("RolledBack")<{ readonly rows: ReadonlyArray<Record<string, unknown>> }> {}

/**
 * One statement run read-only, and everything it did undone: in a
 * transaction that is READ ONLY, under a statement timeout on a server
 * (`QUERY_TIMEOUT`), and always rolled back, so that not even a session
 * setting (`set_config(..., false)`, which a read-only transaction allows)
 * outlives it on the session every request shares. More than one statement
 * is refused: the statement runs prepared, which takes exactly one (a
 * `COMMIT; ...` would otherwise leave the transaction).
 */
export const readOnlyQuery = (statement: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const info = yield* DatabaseInfo
    return yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql.unsafe("SET TRANSACTION READ ONLY")
      // A server cancels the statement itself; the embedded database is bounded by its watchdog.
      if (info.kind === "server") yield* sql.unsafe(`SET LOCAL statement_timeout = '${QUERY_TIMEOUT}'`)
      return yield* new RolledBack({ rows: yield* sql.unsafe<Record<string, unknown>>(statement) })
    })).pipe(Effect.catchTag("RolledBack", (done) => Effect.succeed(done.rows)))
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
  { statement: Argument.String("statement").pipe(Argument.withDescription("One SQL statement, run read-only and rolled back")), json },
  Effect.fn(function*({ statement, json }) {
    const rows = yield* readOnlyQuery(statement).pipe(
      Effect.catchTag("SqlError", (error) => fail(`the query failed: ${databaseMessage(error)}`))
    )
    yield* Console.log(json ? toJson({ rows }) : rows.map(toJson).join("\n") || "(no rows)")
  })
).pipe(Command.withDescription(`Run one read-only SQL statement (${QUERY_TIMEOUT} limit on a server), roll it back, and print its rows`))

const dbDump = Command.make(
  "dump",
  {},
  Effect.fn(function*() {
    const info = yield* DatabaseInfo
    if (info.embedded === undefined) {
      return yield* fail("on a PostgreSQL server use pg_dump itself: pg_dump \"$DATABASE_URL\"")
    }
    const sql = yield* SqlClient.SqlClient
    // In a transaction of its own: the dump holds the session (nothing else
    // runs between its statements) and reads one consistent snapshot.
    const answer = yield* sql.withTransaction(info.embedded.request({ op: "dump" })).pipe(
      Effect.catchTag("SqlError", (error) => fail(`the dump failed: ${error.message}`))
    )
    yield* Console.log(answer.dump ?? "")
  })
).pipe(Command.withDescription("Print the embedded database's data as SQL for psql, to load into a PostgreSQL server"))

const db = Command.make("db").pipe(
  Command.withDescription("Look into the database: read-only queries and a SQL export"),
  Command.withSubcommands([dbQuery, dbDump])
)

/** The root command, without its services: the caller provides them. */
export const commands = Command.make("svc").pipe(
  Command.withDescription("Administer svc: organizations, API keys, console sign-in and the database (`svc start` serves the HTTP API)"),
  Command.withSubcommands([orgs, keys, notifications, consoleCommand, db])
)

