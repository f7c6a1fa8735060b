/** Handlers of the console sign-in, console sessions and API keys groups. */
import { Effect, Option } from "effect"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import type { ApiKey } from "../api/Console.ts"
import { InsufficientScope, LimitReached, NotFound, Unauthenticated } from "../api/Errors.ts"
import { CONSOLE_COOKIE, CurrentPrincipal } from "../api/Security.ts"
import { Identity, type KeyInfo } from "../identity/Identity.ts"
import { SvcConfig } from "../platform/Config.ts"
import { ConsoleSessions, describe, MAX_SESSION_SECONDS } from "./ConsoleSessions.ts"
import { consoleCookieOf, overHttps, publicHostOf, requireConsoleOrigin } from "./Csrf.ts"

/** Sets (or, with `undefined`, clears) the console cookie on the answer. */
const setSessionCookie = (value: string | undefined) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const options = {
      httpOnly: true,
      sameSite: "strict" as const,
      path: "/",
      secure: overHttps(request)
    }
    return HttpEffect.appendPreResponseHandler((_request, response) =>
      Effect.succeed(
        value === undefined
          ? HttpServerResponse.expireCookieUnsafe(response, CONSOLE_COOKIE, options)
          : HttpServerResponse.setCookieUnsafe(response, CONSOLE_COOKIE, value, { ...options, maxAge: `${MAX_SESSION_SECONDS} seconds` })
      )
    )
  })

const NO_SESSION = "No console session: sign in with a link from `npm run cli -- console login`."

export const ConsoleSignInHandlers = HttpApiBuilder.group(
  Api,
  "consoleSignIn",
  Effect.fn(function*(handlers) {
    const sessions = yield* ConsoleSessions
    const publicHost = publicHostOf((yield* SvcConfig).publicUrl)
    return handlers.handleAll({
      session: () =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const cookie = consoleCookieOf(request)
          const session = cookie === "" ? Option.none() : yield* sessions.authenticate(cookie)
          if (Option.isNone(session)) return yield* new Unauthenticated({ detail: NO_SESSION })
          return describe(session.value)
        }),
      signIn: ({ payload }) =>
        Effect.gen(function*() {
          yield* requireConsoleOrigin(publicHost)
          const { cookie, session } = yield* sessions.signIn(payload.token)
          yield* setSessionCookie(cookie)
          return describe(session)
        }),
      signOut: () =>
        Effect.gen(function*() {
          yield* requireConsoleOrigin(publicHost)
          const request = yield* HttpServerRequest.HttpServerRequest
          const cookie = consoleCookieOf(request)
          if (cookie !== "") yield* sessions.signOut(cookie)
          yield* setSessionCookie(undefined)
        })
    })
  })
)

export const ConsoleHandlers = HttpApiBuilder.group(
  Api,
  "console",
  Effect.fn(function*(handlers) {
    const sessions = yield* ConsoleSessions
    return handlers.handleAll({
      listSessions: () =>
        CurrentPrincipal.use((p) => sessions.list(p.orgId, p.consoleSessionId)).pipe(Effect.map((list) => ({ sessions: list }))),
      revokeSession: ({ params }) =>
        CurrentPrincipal.use((p) =>
          sessions.revoke(params.session_id, p.orgId).pipe(
            Effect.catchTag("SessionNotFound", () => Effect.fail(new NotFound({ detail: "No such console session." })))
          )
        )
    })
  })
)

const toApiKey = (key: KeyInfo): ApiKey => ({
  id: key.id,
  name: key.name,
  key_prefix: key.key_prefix,
  scopes: key.scopes,
  created_at: key.created_at,
  revoked_at: key.revoked_at
})

export const ApiKeysHandlers = HttpApiBuilder.group(
  Api,
  "apiKeys",
  Effect.fn(function*(handlers) {
    const identity = yield* Identity
    const config = yield* SvcConfig
    const keysOf = (orgId: string) => identity.listKeys(orgId).pipe(Effect.orDie)
    return handlers.handleAll({
      list: () =>
        CurrentPrincipal.use((p) =>
          Effect.map(keysOf(p.orgId), (keys) => ({
            keys: keys.filter((key) => key.revoked_at === null).reverse().map(toApiKey)
          }))
        ),
      create: ({ payload }) =>
        CurrentPrincipal.use((p) =>
          Effect.gen(function*() {
            // No escalation: a caller grants only scopes it holds itself.
            const missing = payload.scopes.find((scope) => !p.scopes.has(scope))
            if (missing !== undefined) {
              return yield* new InsufficientScope({
                required_scope: missing,
                detail: `You cannot grant the \`${missing}\` scope: you do not hold it yourself.`
              })
            }
            const active = (yield* keysOf(p.orgId)).filter((key) => key.revoked_at === null).length
            if (active >= config.maxApiKeysPerOrg) {
              return yield* new LimitReached({
                limit: "SVC_MAX_API_KEYS_PER_ORG",
                limit_value: config.maxApiKeysPerOrg,
                detail: `The organization already has ${config.maxApiKeysPerOrg} API keys, the most allowed (SVC_MAX_API_KEYS_PER_ORG); revoke one first.`
              })
            }
            const created = yield* identity.createKey({ orgId: p.orgId, scopes: payload.scopes, name: payload.name }).pipe(
              Effect.orDie
            )
            return {
              api_key: {
                id: created.id,
                name: created.name,
                key_prefix: created.key.slice(0, 12),
                scopes: created.scopes,
                created_at: created.created_at,
                revoked_at: null
              },
              key: created.key
            }
          })
        ),
      revoke: ({ params }) =>
        CurrentPrincipal.use((p) =>
          Effect.gen(function*() {
            const owned = (yield* keysOf(p.orgId)).some((key) => key.id === params.key_id)
            if (!owned) return yield* new NotFound({ detail: "No such API key." })
            return toApiKey(yield* identity.revokeKey(params.key_id).pipe(Effect.orDie))
          })
        )
    })
  })
)
