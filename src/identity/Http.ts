/** The server side of the `Authentication` middleware. */
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { HttpEffect, HttpServerResponse } from "effect/http"
import { InsufficientScope, Unauthenticated } from "../api/Errors.ts"
import { Authentication, CurrentPrincipal, RequiredScope, scopeAlternatives } from "../api/Security.ts"
import { RequestFacts } from "../platform/Logging.ts"
import { Identity } from "./Identity.ts"

const challenge = (error: string) =>
  HttpEffect.appendPreResponseHandler((_request, response) =>
    Effect.succeed(HttpServerResponse.setHeader(response, "www-authenticate", `Bearer realm="svc", error="${error}"`))
  )

export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.gen(function*() {
    const identity = yield* Identity
    return Authentication.of({
      // Untraced: the organization annotates the request span itself.
      bearer: Effect.fnUntraced(function*(httpEffect, { credential, endpoint }) {
        const key = Redacted.value(credential)
        const principal = key.length === 0 ? Option.none() : yield* identity.authenticate(key)
        if (Option.isNone(principal)) {
          yield* challenge("invalid_token")
          return yield* new Unauthenticated({
            detail: key.length === 0
              ? "Send the API key as `Authorization: Bearer <key>`."
              : "The API key is unknown or revoked."
          })
        }
        const required = Option.map(Context.getOption(endpoint.annotations, RequiredScope), scopeAlternatives)
        if (Option.isSome(required) && !required.value.some((scope) => principal.value.scopes.has(scope))) {
          yield* challenge("insufficient_scope")
          return yield* new InsufficientScope({
            required_scope: required.value[0]!,
            detail: `This operation needs the ${required.value.map((scope) => `\`${scope}\``).join(" or ")} scope.`
          })
        }
        const facts = yield* RequestFacts
        if (facts !== undefined) facts.orgId = principal.value.orgId
        yield* Effect.annotateCurrentSpan({ "svc.org_id": principal.value.orgId, "svc.key_id": principal.value.keyId })
        return yield* httpEffect.pipe(
          Effect.provideService(CurrentPrincipal, principal.value),
          Effect.annotateLogs({ org_id: principal.value.orgId })
        )
      }),
      console: () => Effect.fail(new Unauthenticated({ detail: "Send the API key as `Authorization: Bearer <key>`." }))
    })
  })
)
