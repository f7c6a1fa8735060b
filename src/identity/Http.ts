/**
 * The server side of the `Authentication` middleware: an API key
 * (`Authorization: Bearer`), or else a console session cookie. A request
 * that sends a bearer credential is decided by it alone; the cookie counts
 * only without one. A session is looked up in the database on every
 * request; a key goes through `Identity`'s key cache, so a revoked key stops
 * working at once in the revoking process, through NOTIFY in the others on
 * a PostgreSQL server, and within `KEY_CACHE_TTL` (2 s) in any case.
 */
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"
import { CrossSiteRequest, InsufficientScope, Unauthenticated } from "../api/Errors.ts"
import { Authentication, CurrentPrincipal, type Principal, RequiredScope, scopeAlternatives } from "../api/Security.ts"
import { ConsoleSessions, principalOf } from "../console/ConsoleSessions.ts"
import { consoleCookieOf, crossSiteReason, httpsPublicUrl, publicHostOf } from "../console/Csrf.ts"
import { SvcConfig } from "../platform/Config.ts"
import { RequestFacts } from "../platform/Logging.ts"
import { Identity } from "./Identity.ts"

const challenge = (error: string) =>
  HttpEffect.appendPreResponseHandler((_request, response) =>
    Effect.succeed(HttpServerResponse.setHeader(response, "www-authenticate", `Bearer realm="svc", error="${error}"`))
  )

const NO_CREDENTIAL = "Send the API key as `Authorization: Bearer <key>`, or sign in to the console."

/**
 * What the bearer scheme answered for a request that sent a bearer
 * credential: the framework then tries the cookie scheme, which must give
 * the same answer (a wrong key never falls back to a cookie).
 */
const bearerVerdicts = new WeakMap<object, Unauthenticated | InsufficientScope>()

export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.gen(function*() {
    const identity = yield* Identity
    const sessions = yield* ConsoleSessions
    const { publicUrl } = yield* SvcConfig
    const publicHost = publicHostOf(publicUrl)
    const httpsPublic = httpsPublicUrl(publicUrl)

    const admit = Effect.fnUntraced(function*<A, E, R>(
      httpEffect: Effect.Effect<A, E, R | CurrentPrincipal>,
      endpoint: { readonly annotations: Context.Context<never> },
      principal: Principal
    ) {
      const required = Option.map(Context.getOption(endpoint.annotations, RequiredScope), scopeAlternatives)
      if (Option.isSome(required) && !required.value.some((scope) => principal.scopes.has(scope))) {
        yield* challenge("insufficient_scope")
        return yield* new InsufficientScope({
          required_scope: required.value[0]!,
          detail: `This operation needs the ${required.value.map((scope) => `\`${scope}\``).join(" or ")} scope.`
        })
      }
      const facts = yield* RequestFacts
      if (facts !== undefined) facts.orgId = principal.orgId
      yield* Effect.annotateCurrentSpan({
        "svc.org_id": principal.orgId,
        ...(principal.consoleSessionId === undefined
          ? { "svc.key_id": principal.keyId }
          : { "svc.console_session_id": principal.consoleSessionId })
      })
      return yield* httpEffect.pipe(
        Effect.provideService(CurrentPrincipal, principal),
        Effect.annotateLogs({ org_id: principal.orgId })
      )
    })

    return Authentication.of({
      // Untraced: the organization annotates the request span itself.
      bearer: Effect.fnUntraced(function*(httpEffect, { credential, endpoint }) {
        const key = Redacted.value(credential)
        // No bearer credential: the cookie scheme (tried next) decides.
        if (key.length === 0) return yield* new Unauthenticated({ detail: NO_CREDENTIAL })
        const request = yield* HttpServerRequest.HttpServerRequest
        const principal = yield* identity.authenticate(key)
        if (Option.isNone(principal)) {
          yield* challenge("invalid_token")
          const error = new Unauthenticated({ detail: "The API key is unknown or revoked." })
          bearerVerdicts.set(request, error)
          return yield* error
        }
        return yield* admit(httpEffect, endpoint, principal.value).pipe(
          Effect.tapError((error) =>
            Effect.sync(() => {
              if (error instanceof InsufficientScope) bearerVerdicts.set(request, error)
            })
          )
        )
      }),
      console: Effect.fnUntraced(function*(httpEffect, { endpoint }) {
        const request = yield* HttpServerRequest.HttpServerRequest
        const verdict = bearerVerdicts.get(request)
        if (verdict !== undefined) return yield* verdict
        // The cookie of this deployment's name (`consoleCookieName`), not the
        // scheme's: on HTTPS it is the `__Host-` one.
        const cookie = consoleCookieOf(request, httpsPublic)
        if (cookie.length === 0) {
          yield* challenge("invalid_token")
          return yield* new Unauthenticated({ detail: NO_CREDENTIAL })
        }
        // Before any lookup: a forged cross-site request costs no query.
        const reason = crossSiteReason(request, publicHost)
        if (reason !== undefined) return yield* new CrossSiteRequest({ detail: reason })
        const session = yield* sessions.authenticate(cookie)
        if (Option.isNone(session)) {
          return yield* new Unauthenticated({
            detail: "The console session has ended (signed out, revoked or expired). Sign in again."
          })
        }
        return yield* admit(httpEffect, endpoint, principalOf(session.value))
      })
    })
  })
)
