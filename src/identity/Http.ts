/**
 * The server side of the `Authentication` middleware: an API key
 * (`Authorization: Bearer`), or else a console session cookie. A request
 * that sends a bearer credential is decided by it alone; the cookie counts
 * only without one. A session is looked up in the database on every
 * request; a key goes through `Identity`'s key cache, so a revoked key stops
 * working at once in the revoking process, through NOTIFY in the others on
 * a PostgreSQL server, and within `KEY_CACHE_TTL` (2 s) in any case.
 */
import { Context, Effect, type Fiber, Layer, Option, Redacted, References, type Types } from "effect"
import { HttpServerRequest, type HttpServerResponse } from "effect/http"
import { CrossSiteRequest, InsufficientScope, Unauthenticated } from "../api/Errors.ts"
import { Authentication, CurrentPrincipal, type Principal, RequiredScope, scopeAlternatives } from "../api/Security.ts"
import { ConsoleSessions, principalOf } from "../console/ConsoleSessions.ts"
import { consoleCookieOf, crossSiteReason, httpsPublicUrl, publicHostOf } from "../console/Csrf.ts"
import { SvcConfig } from "../platform/Config.ts"
import { RequestFacts, withLogAnnotation } from "../platform/Logging.ts"
import { responseHeader } from "../platform/ResponseHeader.ts"
import { Identity } from "./Identity.ts"

const challenge = (error: string) => responseHeader("www-authenticate", `Bearer realm="svc", error="${error}"`)

const NO_CREDENTIAL = "Send the API key as `Authorization: Bearer <key>`, or sign in to the console."

/**
 * What the bearer scheme answered for a request that sent a bearer
 * credential: the framework then tries the cookie scheme, which must give
 * the same answer (a wrong key never falls back to a cookie).
 */
const bearerVerdicts = new WeakMap<object, Unauthenticated | InsufficientScope>()

/** The refusal of `principal` at `endpoint` when it lacks every scope the endpoint requires (any one suffices). */
const scopeRefusal = (
  endpoint: { readonly annotations: Context.Context<never> },
  principal: Principal
): InsufficientScope | undefined => {
  const annotation = Context.getOption(endpoint.annotations, RequiredScope)
  if (Option.isNone(annotation)) return undefined
  const required = scopeAlternatives(annotation.value)
  if (required.some((scope) => principal.scopes.has(scope))) return undefined
  return new InsufficientScope({
    required_scope: required[0]!,
    detail: `This operation needs the ${required.map((scope) => `\`${scope}\``).join(" or ")} scope.`
  })
}

/**
 * The handler, run as `principal`: the request's facts and span learn the
 * organization (and the key or console session), and so do its log lines.
 */
const admitted = <A, E, R>(
  fiber: Fiber.Fiber<unknown, unknown>,
  httpEffect: Effect.Effect<A, E, R | CurrentPrincipal>,
  principal: Principal
): Effect.Effect<A, E, Exclude<R, CurrentPrincipal>> => {
  const facts = fiber.getRef(RequestFacts)
  if (facts !== undefined) facts.orgId = principal.orgId
  const span = fiber.cache.span
  if (span?._tag === "Span" && span.status._tag !== "Ended") {
    span.attribute("svc.org_id", principal.orgId)
    if (principal.consoleSessionId === undefined) span.attribute("svc.key_id", principal.keyId)
    else span.attribute("svc.console_session_id", principal.consoleSessionId)
  }
  // The principal and the log annotation in one context step
  // (`provideService` and `annotateLogs` would take one each).
  return Effect.updateContext(httpEffect, (context: Context.Context<Exclude<R, CurrentPrincipal>>) =>
    withLogAnnotation(
      Context.add(context, CurrentPrincipal, principal),
      fiber.getRef(References.CurrentLogAnnotations),
      "org_id",
      principal.orgId
    ) as Context.Context<R | CurrentPrincipal>)
}

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
      const refused = scopeRefusal(endpoint, principal)
      if (refused !== undefined) {
        yield* challenge("insufficient_scope")
        return yield* refused
      }
      return yield* Effect.withFiber((fiber) => admitted(fiber, httpEffect, principal))
    })

    return Authentication.of({
      // Plain code, no generator: every API request passes here. Untraced:
      // the organization annotates the request span itself.
      bearer: (httpEffect, { credential, endpoint }) => {
        const key = Redacted.value(credential)
        // No bearer credential: the cookie scheme (tried next) decides.
        if (key.length === 0) return Effect.fail(new Unauthenticated({ detail: NO_CREDENTIAL }))
        return Effect.flatMap(
          identity.authenticate(key),
          (principal) =>
            Effect.withFiber(
              (
                fiber
              ): Effect.Effect<
                HttpServerResponse.HttpServerResponse,
                Types.unhandled | Unauthenticated | InsufficientScope,
                HttpServerRequest.HttpServerRequest
              > => {
                const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
                if (Option.isNone(principal)) {
                  const error = new Unauthenticated({ detail: "The API key is unknown or revoked." })
                  bearerVerdicts.set(request, error)
                  return Effect.andThen(challenge("invalid_token"), Effect.fail(error))
                }
                const refused = scopeRefusal(endpoint, principal.value)
                if (refused !== undefined) {
                  bearerVerdicts.set(request, refused)
                  return Effect.andThen(challenge("insufficient_scope"), Effect.fail(refused))
                }
                return admitted(fiber, httpEffect, principal.value)
              }
            )
        )
      },
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
