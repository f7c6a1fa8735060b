/**
 * The CLI's commands, run by `npm run cli` in its own process or, while a
 * server holds the embedded data directory, by that server on its admin
 * channel (`src/cli/AdminChannel.ts`): the same handlers either way.
 *
 *   start   (the server: `main.ts` runs it; listed for --help)
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
 *   console revoke (--session <session id> | --all --org <org id> | --person <name> --org <org id>) --json
 */
import * as Console from "effect/Console"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Argument from "effect/cli/Argument"
import * as Command from "effect/cli/Command"
import * as Flag from "effect/cli/Flag"
import * as CliError from "effect/cli/CliError"
import { ConsolePresetNames, Scopes } from "../api/ScopeNames.ts"
import type { ScopeName } from "../api/Security.ts"
import { parseDurations, SvcConfig } from "../platform/Config.ts"
import type { SqlClient } from "effect/sql"

// The services' modules (and the database's) load when a command runs:
// `svc --help` and a mistyped flag load the CLI alone.
const consoleModule = Effect.promise(() => import("../console/ConsoleSessions.ts"))
const loadIdentity = Effect.gen(function*() {
  return yield* (yield* Effect.promise(() => import("../identity/Identity.ts"))).Identity
})
const loadSessions = Effect.gen(function*() {
  return yield* (yield* consoleModule).ConsoleSessions
})
const loadDatabaseInfo = Effect.gen(function*() {
  return yield* (yield* Effect.promise(() => import("../database/Database.ts"))).DatabaseInfo
})
const loadSql = Effect.gen(function*() {
  return yield* (yield* Effect.promise(() => import("effect/sql"))).SqlClient.SqlClient
})

const json = Flag.Boolean("json").pipe(Flag.withDescription("Print one JSON object"), Flag.withDefault(false))

const Uuid = Schema.String.check(Schema.isUUID(undefined, { message: "Expected an id (UUID)" }))

const fail = (message: string) => Effect.fail(new CliError.UserError({ cause: new Error(message), userMessage: message }))

const print = (asJson: boolean, value: unknown, text: string) => Console.log(asJson ? JSON.stringify(value) : text)

const orgsCreate = Command.make(
  "create",
  {
    name: Flag.String("name").pipe(Flag.withDescription("Organization name"), Flag.withSchema(Schema.NonEmptyString)),
    json
  },
  Effect.fn(function*({ name, json }) {
    const identity = yield* loadIdentity
    const namesakes = yield* identity.namesakes(name)
    const org = yield* identity.createOrg(name)
    // Names need not be unique; a second one of a name is told on stderr, so --json's output stays one object.
    if (namesakes.length > 0) {
      const ids = namesakes.map((other) => other.id).join(", ")
      yield* Console.error(`svc: note: ${JSON.stringify(name)} is also the name of ${ids}; this organization is ${org.id}`)
    }
    yield* print(json, org, `created organization ${org.id} (${org.name})`)
  })
).pipe(Command.withDescription("Create an organization (a name another has is allowed, and noted on stderr)"))

const orgsList = Command.make(
  "list",
  { json },
  Effect.fn(function*({ json }) {
    const identity = yield* loadIdentity
    const orgs = yield* identity.listOrgs
    yield* print(json, { orgs }, orgs.map((org) => `${org.id}  ${org.name}`).join("\n") || "no organizations")
  })
).pipe(Command.withDescription("List organizations"))

const orgsDelete = Command.make(
  "delete",
  { id: Flag.String("id").pipe(Flag.withDescription("Organization id"), Flag.withSchema(Uuid)), json },
  Effect.fn(function*({ id, json }) {
    const identity = yield* loadIdentity
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
    const identity = yield* loadIdentity
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
    const identity = yield* loadIdentity
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
    const identity = yield* loadIdentity
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
    // Loaded here: the endpoints module brings the delivery queue and the
    // outbound HTTP client, which no other command needs.
    const { writeReviewerEmail } = yield* Effect.promise(() => import("../notifications/ReviewerAddress.ts"))
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
    const { MAX_LINK_TTL_SECONDS } = yield* consoleModule
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
    const { DEFAULT_LINK_TTL_SECONDS, validPerson } = yield* consoleModule
    if (!validPerson(name)) return yield* fail("--name must be 1 to 100 printable characters")
    const ttlSeconds = Option.isSome(ttl) ? yield* parseTtl(ttl.value) : DEFAULT_LINK_TTL_SECONDS
    const config = yield* SvcConfig
    const sessions = yield* loadSessions
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
    const sessions = yield* loadSessions
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
    person: Flag.String("person").pipe(
      Flag.withDescription("One person's access to --org: their sessions, their API keys, delegations and reviewer address"),
      Flag.optional
    ),
    org: Flag.String("org").pipe(Flag.withDescription("Organization id (with --all or --person)"), Flag.withSchema(Uuid), Flag.optional),
    json
  },
  Effect.fn(function*({ session, all, person, org, json }) {
    const sessions = yield* loadSessions
    if ([all, Option.isSome(session), Option.isSome(person)].filter(Boolean).length !== 1) {
      return yield* fail("give exactly one of --session ID, --all --org ORG_ID or --person NAME --org ORG_ID")
    }
    if (Option.isSome(person)) {
      if (Option.isNone(org)) return yield* fail("--person needs --org ORG_ID")
      const ended = yield* sessions.revokePerson(org.value, person.value)
      return yield* print(
        json,
        { org_id: org.value, person: person.value, ...ended },
        `revoked console:${person.value} in ${org.value}: ${ended.sessions} session(s), ${ended.keys} API key(s), their delegations and reviewer address`
      )
    }
    if (Option.isSome(session)) {
      yield* sessions.revoke(session.value).pipe(Effect.catchTag("SessionNotFound", () => fail(`no console session ${session.value}`)))
      return yield* print(json, { revoked: 1, session_id: session.value }, `revoked console session ${session.value}`)
    }
    if (Option.isNone(org)) return yield* fail("--all needs --org ORG_ID")
    const count = yield* sessions.revokeAll(org.value)
    yield* print(json, { revoked: count, org_id: org.value }, `revoked ${count} console session(s) of ${org.value}`)
  })
).pipe(Command.withDescription("End console sessions, or a person's access, at once, in every process"))

const consoleCommand = Command.make("console").pipe(
  Command.withDescription("The web console: sign-in links and sessions"),
  Command.withSubcommands([consoleLogin, consoleSessions, consoleRevoke])
)

/** JSON with bigints as strings and dates as ISO text. */
const toJson = (value: unknown) => JSON.stringify(value, (_, v) => typeof v === "bigint" ? v.toString() : v instanceof Uint8Array ? Buffer.from(v).toString("hex") : v)

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
    const { makeEmbeddedClient, startSession } = yield* Effect.promise(() => import("../database/embedded/EmbeddedSession.ts"))
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
  { statement: Argument.String("statement").pipe(Argument.withDescription(`One SQL statement, run read-only and rolled back, for at most ${Duration.format(QUERY_TIMEOUT)}`)), json },
  Effect.fn(function*({ statement, json }) {
    const rows = yield* readOnlyQuery(statement).pipe(
      Effect.catchTag("SqlError", (error) => fail(`the query failed: ${databaseMessage(error)}`))
    )
    yield* Console.log(json ? toJson({ rows }) : rows.map(toJson).join("\n") || "(no rows)")
  })
).pipe(Command.withDescription(
  `Run one read-only SQL statement (at most ${Duration.format(QUERY_TIMEOUT)}; on the embedded database, on a copy of its data), roll it back, and print its rows`
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

const db = Command.make("db").pipe(
  Command.withDescription("Look into the database: read-only queries and a SQL export"),
  Command.withSubcommands([dbQuery, dbDump])
)

/**
 * `svc start` serves the HTTP API: `main.ts` runs the server for it before
 * any of this loads. It is listed here so `svc --help` shows it; reached
 * only with arguments it does not take.
 */
const start = Command.make("start", {}, () =>
  fail("start takes no arguments: its settings come from the environment (PORT, HOST, DATABASE_URL, SVC_*; see the README)")
).pipe(Command.withDescription("Serve the HTTP API on HOST:PORT, as `npm start` does (settings from the environment)"))

/** The root command, without its services: the caller provides them. */
export const commands = Command.make("svc").pipe(
  Command.withDescription("Administer svc: organizations, API keys, console sign-in and the database (`svc start` serves the HTTP API)"),
  Command.withSubcommands([start, orgs, keys, notifications, consoleCommand, db])
)

