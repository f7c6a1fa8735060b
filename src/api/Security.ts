/**
 * Who is calling and what they may do. The `Authentication` middleware tag is
 * part of the contract (the typed client must supply a bearer token); its
 * server implementation lives in `src/identity`.
 */
import { Context, Schema } from "effect"
import { HttpApiMiddleware, HttpApiSecurity, OpenApi } from "effect/http-api"
import { InsufficientScope, Unauthenticated } from "./Errors.ts"

/** Every scope a key can hold (DESIGN.md, "Identity and authorization"). */
export const Scopes = [
  "feedback.write",
  "feedback.read",
  "datasets.write",
  "datasets.read",
  "org_config.read",
  "org_config.write",
  "tasks.read",
  "tasks.write",
  "agents.read",
  "agents.write",
  "approvals.decide"
] as const

export const ScopeName = Schema.Literals(Scopes)
export type ScopeName = typeof ScopeName.Type

/** The authenticated caller, provided to every `/v1` handler. */
export interface Principal {
  readonly orgId: string
  readonly keyId: string
  readonly scopes: ReadonlySet<ScopeName>
}

export class CurrentPrincipal extends Context.Service<CurrentPrincipal, Principal>()("svc/api/CurrentPrincipal") {}

/** Endpoint annotation naming the scope the endpoint needs. */
export class RequiredScope extends Context.Service<RequiredScope, ScopeName>()("svc/api/RequiredScope") {}

/**
 * Marks an endpoint as needing `scope`: the authentication middleware reads
 * the annotation, and the OpenAPI document says so in the description.
 */
export const requireScope = (scope: ScopeName, description?: string) =>
<E extends { annotate: (key: typeof RequiredScope, value: ScopeName) => E }>(endpoint: E): E => {
  const annotated = endpoint.annotate(RequiredScope, scope) as E & {
    annotate: (key: typeof OpenApi.Description, value: string) => E
  }
  const text = `${description ? `${description}\n\n` : ""}Requires scope \`${scope}\`.`
  return annotated.annotate(OpenApi.Description, text)
}

export class Authentication extends HttpApiMiddleware.Service<Authentication, {
  provides: CurrentPrincipal
}>()("svc/api/Authentication", {
  requiredForClient: true,
  security: { bearer: HttpApiSecurity.bearer },
  error: [Unauthenticated, InsufficientScope]
}) {}
