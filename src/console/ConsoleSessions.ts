/**
 * Console sign-in links and console sessions.
 *
 * A link's token and a session's cookie token are 256 random bits; only
 * their SHA-256 is stored (as for API keys: a slow hash adds nothing to a
 * random secret). A link is used by one atomic UPDATE, so it works once
 * even when two requests race. A session is looked up in the database on
 * every request, never cached: revoking it (or signing out) takes effect at
 * once in every process. Every instant is the database's (`now()`), never
 * the process's clock.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Data, Effect, Layer, Option, Schema } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import type { ConsoleSession, ConsoleSessionSummary } from "../api/Console.ts"
import { LinkExpired, LinkInvalid, LinkUsed } from "../api/Console.ts"
import { consoleActor, ConsolePreset, ConsolePresets, type Principal, type ScopeName } from "../api/Security.ts"
import { randomToken } from "../platform/Crypto.ts"
import { sha256Hex } from "../platform/Digest.ts"
import { newId } from "../platform/Ids.ts"
import { Instant, InstantOrNull, rowsOf } from "../platform/Rows.ts"
import { iso } from "../platform/Time.ts"

/** Sign-in link secrets start with this; session cookies with `SESSION_PREFIX`. */
export const LINK_PREFIX = "svl_"
export const SESSION_PREFIX = "svcs_"

/** A session ends after this long without a request. */
export const IDLE_TIMEOUT_SECONDS = 8 * 3600
/** A session ends this long after sign-in however it is used. */
export const MAX_SESSION_SECONDS = 7 * 24 * 3600
/** A link's time to live: 15 minutes unless `--ttl` says otherwise, at most 24 hours. */
export const DEFAULT_LINK_TTL_SECONDS = 15 * 60
export const MAX_LINK_TTL_SECONDS = 24 * 3600
/** `last_seen_at` is written at most this often per session (a write per request would cost more than the read). */
const TOUCH_EVERY_SECONDS = 60

export class OrgNotFound extends Data.TaggedError("OrgNotFound")<{ readonly orgId: string }> {}
export class SessionNotFound extends Data.TaggedError("SessionNotFound")<{ readonly sessionId: string }> {}

/** A person's name as the console shows it and records name it: printable, 1 to 100 characters. */
export const validPerson = (name: string): boolean =>
  name.trim().length > 0 && name.length <= 100 && !/[\u0000-\u001f\u007f-\u009f]/.test(name)

/** A live console session as the middleware and the handlers see it, decoded from its `console_sessions` row. */
const SESSION_KEYS = {
  orgId: "org_id",
  createdAt: "created_at",
  lastSeenAt: "last_seen_at",
  absoluteExpiresAt: "absolute_expires_at"
} as const
const LiveSessionFields = {
  id: Schema.String,
  orgId: Schema.String,
  preset: ConsolePreset,
  person: Schema.String,
  createdAt: Instant,
  lastSeenAt: Instant,
  absoluteExpiresAt: Instant
}
const LiveSessionRow = Schema.Struct(LiveSessionFields).pipe(Schema.encodeKeys(SESSION_KEYS))
export type LiveSession = typeof LiveSessionRow.Type
const SessionRows = rowsOf("console_sessions", LiveSessionRow)
const StaleRows = rowsOf(
  "console_sessions",
  Schema.Struct({ ...LiveSessionFields, stale: Schema.Boolean }).pipe(Schema.encodeKeys(SESSION_KEYS))
)
const LinkRows = rowsOf("console_links", Schema.Struct({ expires_at: Instant }))
const UsedLinkRows = rowsOf(
  "console_links",
  Schema.Struct({ org_id: Schema.String, preset: ConsolePreset, person: Schema.String })
)
const RevokedRows = rowsOf("console_sessions", Schema.Struct({ sessions: Schema.Number, keys: Schema.Number }))
const KnownLinkRows = rowsOf("console_links", Schema.Struct({ used_at: InstantOrNull, expires_at: Instant }))

const idleExpiry = (session: LiveSession) =>
  new Date(Math.min(session.lastSeenAt.getTime() + IDLE_TIMEOUT_SECONDS * 1000, session.absoluteExpiresAt.getTime()))

export const presetScopes = (preset: ConsolePreset): ReadonlyArray<ScopeName> => ConsolePresets[preset]

/** The principal of a console session: its preset's scopes, its person as the actor. */
export const principalOf = (session: LiveSession): Principal => ({
  orgId: session.orgId,
  keyId: session.id,
  scopes: new Set(presetScopes(session.preset)),
  actor: consoleActor(session.person),
  consoleSessionId: session.id
})

export const describe = (session: LiveSession): ConsoleSession => ({
  session_id: session.id,
  org_id: session.orgId,
  person: session.person,
  preset: session.preset,
  scopes: [...presetScopes(session.preset)],
  actor: consoleActor(session.person),
  created_at: iso(session.createdAt),
  expires_at: iso(idleExpiry(session)),
  absolute_expires_at: iso(session.absoluteExpiresAt)
})

const summarize = (session: LiveSession, currentId: string | undefined): ConsoleSessionSummary => ({
  id: session.id,
  person: session.person,
  preset: session.preset,
  created_at: iso(session.createdAt),
  last_seen_at: iso(session.lastSeenAt),
  expires_at: iso(idleExpiry(session)),
  absolute_expires_at: iso(session.absoluteExpiresAt),
  current: session.id === currentId
})

const SESSION_COLUMNS = "id, org_id, preset, person, created_at, last_seen_at, absolute_expires_at"

/** The SQL condition of a live session (not revoked, not idle too long, not too old). */
const LIVE =
  `revoked_at IS NULL AND last_seen_at > now() - make_interval(secs => ${IDLE_TIMEOUT_SECONDS}) AND absolute_expires_at > now()`

export interface NewLink {
  readonly orgId: string
  readonly preset: ConsolePreset
  readonly person: string
  readonly ttlSeconds: number
}

export class ConsoleSessions extends Context.Service<ConsoleSessions, {
  /** A one-time sign-in link's secret and expiry (the CLI builds the URL). */
  readonly createLink: (
    input: NewLink
  ) => Effect.Effect<{ readonly token: string; readonly expiresAt: string }, OrgNotFound>
  /** Uses a link: a new session and its cookie token. */
  readonly signIn: (token: string) => Effect.Effect<
    { readonly session: LiveSession; readonly cookie: string },
    LinkInvalid | LinkUsed | LinkExpired
  >
  /** The live session of a cookie token, if any; notes the request for the idle timeout. */
  readonly authenticate: (cookie: string) => Effect.Effect<Option.Option<LiveSession>>
  /** Whether the session is still live (open streams re-check it). */
  readonly isLive: (sessionId: string) => Effect.Effect<boolean>
  /** Ends the cookie's session, if live. */
  readonly signOut: (cookie: string) => Effect.Effect<void>
  readonly list: (orgId: string, currentId?: string) => Effect.Effect<ReadonlyArray<ConsoleSessionSummary>>
  /** Ends one session; `orgId` confines it to an organization (the API), none for the operator's CLI. */
  readonly revoke: (sessionId: string, orgId?: string) => Effect.Effect<void, SessionNotFound>
  /** Ends every live session of the organization; how many ended. */
  readonly revokeAll: (orgId: string) => Effect.Effect<number>
  /**
   * Ends a console person's access, at once and in every process (one
   * statement, `svc_revoke_console_person`, migration 0890): their sessions
   * and unused sign-in links, the API keys that are theirs, their
   * delegations given and received, and their reviewer address (so its
   * links and mail). How many sessions and keys ended.
   */
  readonly revokePerson: (
    orgId: string,
    person: string
  ) => Effect.Effect<{ readonly sessions: number; readonly keys: number }>
}>()("svc/console/ConsoleSessions") {
  static readonly layer = Layer.effect(
    ConsoleSessions,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient

      const createLink = Effect.fn("ConsoleSessions.createLink")(function*(input: NewLink) {
        const [org] = yield* sql`SELECT 1 FROM orgs WHERE id = ${input.orgId}`.pipe(Effect.orDie)
        if (org === undefined) return yield* new OrgNotFound({ orgId: input.orgId })
        const token = randomToken(LINK_PREFIX)
        const row = yield* LinkRows.returned(sql`
          INSERT INTO console_links (id, org_id, token_hash, preset, person, expires_at)
          VALUES (${newId()}, ${input.orgId}, ${sha256Hex(token)}, ${input.preset}, ${input.person},
            now() + make_interval(secs => ${input.ttlSeconds}))
          RETURNING expires_at
        `)
        return { token, expiresAt: iso(row.expires_at) }
      })

      const signIn = Effect.fn("ConsoleSessions.signIn")(function*(token: string) {
        if (!token.startsWith(LINK_PREFIX) || token.length > 200) {
          return yield* new LinkInvalid({ detail: "This is not a sign-in link of this service. Ask for a new one." })
        }
        const hash = sha256Hex(token)
        const outcome = yield* sql.withTransaction(Effect.gen(function*() {
          // The one statement that uses a link: of two racing requests, one
          // updates the row and the other finds it used.
          const link = yield* UsedLinkRows.one(sql`
            UPDATE console_links SET used_at = now()
            WHERE token_hash = ${hash} AND used_at IS NULL AND expires_at > now()
            RETURNING org_id, preset, person
          `)
          if (link === undefined) {
            const known = yield* KnownLinkRows.one(sql`
              SELECT used_at, expires_at FROM console_links WHERE token_hash = ${hash}
            `)
            return { _tag: "refused" as const, known }
          }
          const cookie = randomToken(SESSION_PREFIX)
          const session = yield* SessionRows.returned(sql`
            INSERT INTO console_sessions (id, org_id, token_hash, preset, person, absolute_expires_at)
            VALUES (${newId()}, ${link.org_id}, ${sha256Hex(cookie)}, ${link.preset}, ${link.person},
              now() + make_interval(secs => ${MAX_SESSION_SECONDS}))
            RETURNING ${sql.literal(SESSION_COLUMNS)}
          `)
          return { _tag: "session" as const, session, cookie }
        })).pipe(Effect.orDie)
        if (outcome._tag === "session") return { session: outcome.session, cookie: outcome.cookie }
        const known = outcome.known
        if (known === undefined) {
          return yield* new LinkInvalid({ detail: "This is not a sign-in link of this service. Ask for a new one." })
        }
        if (known.used_at !== null) {
          return yield* new LinkUsed({
            used_at: iso(known.used_at),
            detail: "This sign-in link was used already; a link works once. Ask for a new one."
          })
        }
        return yield* new LinkExpired({
          expired_at: iso(known.expires_at),
          detail: "This sign-in link expired before it was used. Ask for a new one."
        })
      })

      const authenticate = Effect.fn("ConsoleSessions.authenticate")(function*(cookie: string) {
        if (!cookie.startsWith(SESSION_PREFIX) || cookie.length > 200) return Option.none<LiveSession>()
        const row = yield* StaleRows.one(sql`
          SELECT ${
          sql.literal(SESSION_COLUMNS)
        }, last_seen_at < now() - make_interval(secs => ${TOUCH_EVERY_SECONDS}) AS stale
          FROM console_sessions WHERE token_hash = ${sha256Hex(cookie)} AND ${sql.literal(LIVE)}
        `)
        if (row === undefined) return Option.none<LiveSession>()
        const { stale, ...session } = row
        if (!stale) return Option.some(session)
        const touched = yield* SessionRows.one(sql`
          UPDATE console_sessions SET last_seen_at = now() WHERE id = ${row.id} AND ${sql.literal(LIVE)}
          RETURNING ${sql.literal(SESSION_COLUMNS)}
        `)
        return touched === undefined ? Option.none<LiveSession>() : Option.some(touched)
      })

      const isLive = (sessionId: string) =>
        sql`SELECT 1 FROM console_sessions WHERE id = ${sessionId} AND ${sql.literal(LIVE)}`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const signOut = Effect.fn("ConsoleSessions.signOut")(function*(cookie: string) {
        if (!cookie.startsWith(SESSION_PREFIX) || cookie.length > 200) return
        yield* sql`
          UPDATE console_sessions SET revoked_at = now() WHERE token_hash = ${sha256Hex(cookie)} AND revoked_at IS NULL
        `.pipe(Effect.orDie)
      })

      const list = Effect.fn("ConsoleSessions.list")(function*(orgId: string, currentId?: string) {
        const rows = yield* SessionRows.all(sql`
          SELECT ${sql.literal(SESSION_COLUMNS)} FROM console_sessions
          WHERE org_id = ${orgId} AND ${sql.literal(LIVE)} ORDER BY seq DESC
        `)
        return rows.map((row) => summarize(row, currentId))
      })

      const revoke = Effect.fn("ConsoleSessions.revoke")(function*(sessionId: string, orgId?: string) {
        const rows = orgId === undefined
          ? yield* sql`UPDATE console_sessions SET revoked_at = coalesce(revoked_at, now()) WHERE id = ${sessionId} RETURNING id`
            .pipe(Effect.orDie)
          : yield* sql`
            UPDATE console_sessions SET revoked_at = coalesce(revoked_at, now()) WHERE id = ${sessionId} AND org_id = ${orgId}
            RETURNING id
          `.pipe(Effect.orDie)
        if (rows.length === 0) return yield* new SessionNotFound({ sessionId })
      })

      const revokeAll = Effect.fn("ConsoleSessions.revokeAll")(function*(orgId: string) {
        const rows = yield* sql`
          UPDATE console_sessions SET revoked_at = now() WHERE org_id = ${orgId} AND revoked_at IS NULL RETURNING id
        `.pipe(Effect.orDie)
        return rows.length
      })

      const revokePerson = Effect.fn("ConsoleSessions.revokePerson")(function*(orgId: string, person: string) {
        return yield* RevokedRows.returned(
          sql`SELECT sessions, keys FROM svc_revoke_console_person(${orgId}, ${person})`
        )
      })

      return ConsoleSessions.of({
        createLink,
        signIn,
        authenticate,
        isLive,
        signOut,
        list,
        revoke,
        revokeAll,
        revokePerson
      })
    })
  )
}

/** Deletes sign-in links used or expired before `before` (`retention/Retention.ts`): at most `batch`, skipping rows another statement holds; answers the rows. */
export const pruneLinks = (sql: SqlClient.SqlClient, before: Statement.Fragment, batch: number) =>
  sql`
    DELETE FROM console_links WHERE id IN (
      SELECT id FROM console_links WHERE least(coalesce(used_at, expires_at), expires_at) < ${before} LIMIT ${batch} FOR UPDATE SKIP LOCKED
    )
    RETURNING 1 AS deleted
  `

/** Deletes console sessions ended (revoked, expired, idle too long) before `before` (`retention/Retention.ts`): at most `batch`, skipping rows another statement holds; answers the rows. */
export const pruneSessions = (sql: SqlClient.SqlClient, before: Statement.Fragment, batch: number) =>
  sql`
    DELETE FROM console_sessions WHERE id IN (
      SELECT id FROM console_sessions WHERE least(
        coalesce(revoked_at, absolute_expires_at),
        absolute_expires_at,
        last_seen_at + make_interval(secs => ${IDLE_TIMEOUT_SECONDS})
      ) < ${before} LIMIT ${batch} FOR UPDATE SKIP LOCKED
    )
    RETURNING 1 AS deleted
  `
