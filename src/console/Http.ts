/** Handlers of the console sign-in and console sessions groups. */
import { Effect, Option } from "effect"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { NotFound, Unauthenticated } from "../api/Errors.ts"
import { CONSOLE_COOKIE_SECURE, CurrentPrincipal } from "../api/Security.ts"
import { SvcConfig } from "../platform/Config.ts"
import { ConsoleSessions, describe, MAX_SESSION_SECONDS } from "./ConsoleSessions.ts"
import { consoleCookieName, consoleCookieOf, httpsPublicUrl, publicHostOf, requireConsoleOrigin } from "./Csrf.ts"

/**
 * Sets (or, with `undefined`, clears) the console cookie on the answer:
 * `__Host-svc_console_session`, `Secure`, whenever the public URL is HTTPS
 * or the request came over HTTPS (`consoleCookieName`).
 */
const setSessionCookie = (value: string | undefined, httpsPublic: boolean) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const name = consoleCookieName(request, httpsPublic)
    const options = {
      httpOnly: true,
      sameSite: "strict" as const,
      path: "/",
      secure: name === CONSOLE_COOKIE_SECURE
    }
    return HttpEffect.appendPreResponseHandler((_request, response) =>
      Effect.succeed(
        value === undefined
          ? HttpServerResponse.expireCookieUnsafe(response, name, options)
          : HttpServerResponse.setCookieUnsafe(response, name, value, {
            ...options,
            maxAge: `${MAX_SESSION_SECONDS} seconds`
          })
      )
    )
  })

const NO_SESSION = "No console session: sign in with a link from `npm run cli -- console login`."

export const ConsoleSignInHandlers = HttpApiBuilder.group(
  Api,
  "consoleSignIn",
  Effect.fn(function*(handlers) {
    const sessions = yield* ConsoleSessions
    const { publicUrl } = yield* SvcConfig
    const publicHost = publicHostOf(publicUrl)
    const httpsPublic = httpsPublicUrl(publicUrl)
    return handlers.handleAll({
      session: () =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const cookie = consoleCookieOf(request, httpsPublic)
          const session = cookie === "" ? Option.none() : yield* sessions.authenticate(cookie)
          if (Option.isNone(session)) return yield* new Unauthenticated({ detail: NO_SESSION })
          return describe(session.value)
        }),
      signIn: ({ payload }) =>
        Effect.gen(function*() {
          yield* requireConsoleOrigin(publicHost)
          const { cookie, session } = yield* sessions.signIn(payload.token)
          yield* setSessionCookie(cookie, httpsPublic)
          return describe(session)
        }),
      signOut: () =>
        Effect.gen(function*() {
          yield* requireConsoleOrigin(publicHost)
          const request = yield* HttpServerRequest.HttpServerRequest
          const cookie = consoleCookieOf(request, httpsPublic)
          if (cookie !== "") yield* sessions.signOut(cookie)
          yield* setSessionCookie(undefined, httpsPublic)
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
        CurrentPrincipal.use((p) => sessions.list(p.orgId, p.consoleSessionId)).pipe(
          Effect.map((list) => ({ sessions: list }))
        ),
      revokeSession: ({ params }) =>
        CurrentPrincipal.use((p) =>
          sessions.revoke(params.session_id, p.orgId).pipe(
            Effect.catchTag("SessionNotFound", () => Effect.fail(new NotFound({ detail: "No such console session." })))
          )
        )
    })
  })
)
