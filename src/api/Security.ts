/**
 * Who is calling and what they may do. The `Authentication` middleware tag is
 * part of the contract (the typed client must supply a bearer token, or the
 * browser its console session cookie); its server implementation lives in
 * `src/identity`.
 */
import { Context, Schema } from "effect"
import { HttpApiMiddleware, HttpApiSecurity, OpenApi } from "effect/http-api"
import { CrossSiteRequest, InsufficientScope, Unauthenticated } from "./Errors.ts"
import { ConsolePresetNames, Scopes } from "./ScopeNames.ts"

export { Scopes }

export const ScopeName = Schema.Literals(Scopes)
export type ScopeName = typeof ScopeName.Type

/** The console's presets: the scopes a console session of each preset holds. */
export const ConsolePresets = {
  reviewer: ["feedback.read", "feedback.review", "tasks.read", "datasets.read"],
  approver: ["agents.read", "approvals.decide", "tasks.read"],
  admin: Scopes
} as const satisfies Record<string, ReadonlyArray<ScopeName>>

export const ConsolePreset = Schema.Literals(ConsolePresetNames)
export type ConsolePreset = typeof ConsolePreset.Type

/**
 * The cookie that carries a console session over plain HTTP (loopback,
 * development): `HttpOnly; SameSite=Strict; Path=/`.
 */
export const CONSOLE_COOKIE = "svc_console_session"

/**
 * The cookie that carries a console session whenever the public URL
 * (`SVC_PUBLIC_URL`) is HTTPS or the request came over HTTPS: the
 * `__Host-` prefix makes the browser keep it only when it is `Secure`, has
 * `Path=/` and no `Domain`, so no sibling host can set or shadow it.
 */
export const CONSOLE_COOKIE_SECURE = `__Host-${CONSOLE_COOKIE}`

/**
 * The header a state-changing request authenticated by the console cookie
 * must carry (any value; the console sends `1`). A plain HTML form cannot
 * send a custom header, so a cross-site form post never has it.
 */
export const CONSOLE_HEADER = "x-svc-console"

/** How a record names a console session's person as its actor: `console:<name>`. */
export const consoleActor = (person: string) => `console:${person}`

/** The authenticated caller, provided to every `/v1` handler. */
export interface Principal {
  readonly orgId: string
  /** The API key's id; for a console session, the session's id. */
  readonly keyId: string
  readonly scopes: ReadonlySet<ScopeName>
  /**
   * Who records name as the actor (`decided_by`, `created_by`): the API
   * key's id, or `console:<person>` for a console session.
   */
  readonly actor: string
  /** A console session's id, when the request came with the console cookie. */
  readonly consoleSessionId?: string | undefined
}

export class CurrentPrincipal extends Context.Service<CurrentPrincipal, Principal>()("svc/api/CurrentPrincipal") {}

/** Endpoint annotation naming the scope the endpoint needs: one, or any one of several. */
export class RequiredScope
  extends Context.Service<RequiredScope, ScopeName | ReadonlyArray<ScopeName>>()("svc/api/RequiredScope")
{}

/** The scopes of a `RequiredScope` annotation, as a list (any one suffices). */
export const scopeAlternatives = (required: ScopeName | ReadonlyArray<ScopeName>): ReadonlyArray<ScopeName> =>
  typeof required === "string" ? [required] : required

/**
 * Marks an endpoint as needing `scope` (or any one of several): the
 * authentication middleware reads the annotation, and the OpenAPI document
 * says so in the description.
 */
export const requireScope =
  (scope: ScopeName | ReadonlyArray<ScopeName>, description?: string) =>
  <E extends { annotate: (key: typeof RequiredScope, value: ScopeName | ReadonlyArray<ScopeName>) => E }>(
    endpoint: E
  ): E => {
    const annotated = endpoint.annotate(RequiredScope, scope) as E & {
      annotate: (key: typeof OpenApi.Description, value: string) => E
    }
    const names = scopeAlternatives(scope).map((name) => `\`${name}\``)
    const sentence = names.length === 1 ? `Requires scope ${names[0]}.` : `Requires scope ${names.join(" or ")}.`
    const text = `${description ? `${description}\n\n` : ""}${sentence}`
    return annotated.annotate(OpenApi.Description, text)
  }

/**
 * The console session cookie, as a security scheme. The browser sends it by
 * itself; a state-changing request with it must also carry `X-Svc-Console`
 * and come from the console's own origin (`CROSS_SITE_REQUEST` otherwise).
 */
const consoleCookie = HttpApiSecurity.apiKey({ key: CONSOLE_COOKIE, in: "cookie" }).pipe(
  HttpApiSecurity.annotate(
    OpenApi.Description,
    `A console session (set by \`POST /v1/console/sign-in\`): the \`${CONSOLE_COOKIE_SECURE}\` cookie (\`Secure\`) when the service's public URL is HTTPS or the request came over HTTPS, else the \`${CONSOLE_COOKIE}\` cookie. Requests other than GET, HEAD and OPTIONS must also send the \`X-Svc-Console: 1\` header and must not come from another site.`
  )
)

export class Authentication extends HttpApiMiddleware.Service<Authentication, {
  provides: CurrentPrincipal
}>()("svc/api/Authentication", {
  requiredForClient: true,
  security: { bearer: HttpApiSecurity.bearer, console: consoleCookie },
  error: [Unauthenticated, InsufficientScope, CrossSiteRequest]
}) {}
