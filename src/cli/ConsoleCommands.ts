/**
 * `svc console`: one-time sign-in links for the web console, and the
 * sessions they open (listed, and ended at once in every process).
 */
import * as Command from "effect/cli/Command"
import * as Flag from "effect/cli/Flag"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { ConsolePresetNames } from "../api/ScopeNames.ts"
import { parseDurations, SvcConfig } from "../platform/Config.ts"
import { consoleModule, fail, json, loadSessions, orgFlag, print, Uuid } from "./Common.ts"

/** `15m`, `1h`...: between a minute and `MAX_LINK_TTL_SECONDS`. */
const parseTtl = (raw: string) =>
  Effect.gen(function*() {
    const { MAX_LINK_TTL_SECONDS } = yield* consoleModule
    const parsed = yield* parseDurations("--ttl", raw).pipe(
      Effect.catch(() => fail(`--ttl: "${raw}" is not a duration such as 15m or 1h`))
    )
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
    preset: Flag.Literals("preset", ConsolePresetNames).pipe(
      Flag.withDescription("What the person may do: reviewer, approver or admin")
    ),
    name: Flag.String("name").pipe(
      Flag.withDescription("The person's name, as records will name them (console:<name>)")
    ),
    ttl: Flag.String("ttl").pipe(
      Flag.withDescription("How long the link works (default 15m, at most 24h)"),
      Flag.optional
    ),
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
    const host = config.host === "0.0.0.0" || config.host === "::"
      ? "127.0.0.1"
      : config.host.includes(":")
      ? `[${config.host}]`
      : config.host
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
      list.map((s) => `${s.id}  ${s.preset}  ${s.person}  last seen ${s.last_seen_at}  ends by ${s.expires_at}`).join(
        "\n"
      ) ||
        "no console sessions"
    )
  })
).pipe(Command.withDescription("List an organization's console sessions that have not ended"))

const consoleRevoke = Command.make(
  "revoke",
  {
    session: Flag.String("session").pipe(
      Flag.withDescription("Console session id"),
      Flag.withSchema(Uuid),
      Flag.optional
    ),
    all: Flag.Boolean("all").pipe(Flag.withDescription("Every session of --org"), Flag.withDefault(false)),
    person: Flag.String("person").pipe(
      Flag.withDescription(
        "One person's access to --org: their sessions, their API keys, delegations and reviewer address"
      ),
      Flag.optional
    ),
    org: Flag.String("org").pipe(
      Flag.withDescription("Organization id (with --all or --person)"),
      Flag.withSchema(Uuid),
      Flag.optional
    ),
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
      yield* sessions.revoke(session.value).pipe(
        Effect.catchTag("SessionNotFound", () => fail(`no console session ${session.value}`))
      )
      return yield* print(json, { revoked: 1, session_id: session.value }, `revoked console session ${session.value}`)
    }
    if (Option.isNone(org)) return yield* fail("--all needs --org ORG_ID")
    const count = yield* sessions.revokeAll(org.value)
    yield* print(json, { revoked: count, org_id: org.value }, `revoked ${count} console session(s) of ${org.value}`)
  })
).pipe(Command.withDescription("End console sessions, or a person's access, at once, in every process"))

export const consoleCommand = Command.make("console").pipe(
  Command.withDescription("The web console: sign-in links and sessions"),
  Command.withSubcommands([consoleLogin, consoleSessions, consoleRevoke])
)
