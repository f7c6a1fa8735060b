/**
 * The web console's sign-in and sessions, and the management of API keys
 * and console sessions. A console session is made from a one-time
 * sign-in link (`npm run cli -- console login ...`); the link's secret
 * travels in the URL fragment, so it never reaches a server log, and is
 * posted here only when the person presses "Sign in".
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Text, Timestamp, Uuid } from "./Common.ts"
import { documented, notFound } from "./Documentation.ts"
import {
  CrossSiteRequest,
  InsufficientScope,
  InvalidRequest,
  LimitReached,
  NotFound,
  Problem,
  Unauthenticated
} from "./Errors.ts"
import * as Examples from "./Examples.ts"
import { Authentication, ConsolePreset, requireScope, ScopeName } from "./Security.ts"

// ---------------------------------------------------------------------------
// Sign-in

const SignIn = Schema.Struct({
  token: Text.check(Schema.isMinLength(1), Schema.isMaxLength(200)).annotate({
    description: "The secret of the sign-in link: the part after `#` in `/console/sign-in#<token>`"
  })
})

/** Who a console session is: `GET /v1/console/session` and the answer of sign-in. */
export const ConsoleSession = Schema.Struct({
  session_id: Uuid,
  org_id: Uuid,
  person: Schema.String.annotate({ description: "The name given to `console login --name`" }),
  preset: ConsolePreset,
  scopes: Schema.Array(ScopeName),
  actor: Schema.String.annotate({
    description: "How records name this person as their actor (`decided_by`, `created_by`): `console:<person>`"
  }),
  created_at: Timestamp,
  expires_at: Timestamp.annotate({
    description:
      "When the session ends unless used before: 8 hours after its last request, at most `absolute_expires_at`"
  }),
  absolute_expires_at: Timestamp.annotate({
    description: "7 days after sign-in: the session ends then however it is used"
  })
})
export type ConsoleSession = typeof ConsoleSession.Type

/** A console session in the list of the organization's sessions. */
export const ConsoleSessionSummary = Schema.Struct({
  id: Uuid,
  person: Schema.String,
  preset: ConsolePreset,
  created_at: Timestamp,
  last_seen_at: Timestamp,
  expires_at: Timestamp,
  absolute_expires_at: Timestamp,
  current: Schema.Boolean.annotate({ description: "Whether this is the session making the request" })
})
export type ConsoleSessionSummary = typeof ConsoleSessionSummary.Type

export class LinkInvalid extends Problem<LinkInvalid>()("LinkInvalid", {
  code: "LINK_INVALID",
  status: 400,
  title: "This is not a sign-in link of this service"
}) {}

export class LinkUsed extends Problem<LinkUsed>()("LinkUsed", {
  code: "LINK_USED",
  status: 410,
  title: "The sign-in link was already used"
}, {
  used_at: Schema.optionalKey(Timestamp)
}) {}

export class LinkExpired extends Problem<LinkExpired>()("LinkExpired", {
  code: "LINK_EXPIRED",
  status: 410,
  title: "The sign-in link has expired"
}, {
  expired_at: Schema.optionalKey(Timestamp)
}) {}

/**
 * Sign-in, sign-out and "who am I": the console cookie only, never an API
 * key (no `Authentication` middleware; the handlers read the cookie).
 */
export class ConsoleSignInApi extends HttpApiGroup.make("consoleSignIn")
  .add(
    HttpApiEndpoint.get("session", "/v1/console/session", {
      success: ConsoleSession,
      error: Unauthenticated
    }).pipe(
      documented({
        summary: "Who is signed in",
        description:
          "The console session of the request's console cookie (`__Host-svc_console_session` over HTTPS, `svc_console_session` over plain HTTP): person, preset, scopes, organization and expiry. Without a live session (none, signed out, revoked or expired) 401 `UNAUTHENTICATED`. Needs no scope; API keys are not console sessions.",
        response: Examples.consoleSession,
        errors: { 401: "No console session: sign in again." }
      })
    ),
    HttpApiEndpoint.post("signIn", "/v1/console/sign-in", {
      payload: SignIn,
      success: ConsoleSession,
      error: [LinkInvalid, LinkUsed, LinkExpired, CrossSiteRequest]
    }).pipe(
      documented({
        summary: "Sign in to the console",
        description:
          "Exchanges a one-time sign-in link (from `npm run cli -- console login`) for a console session: sets the console cookie (`HttpOnly; SameSite=Strict; Path=/`): `__Host-svc_console_session`, `Secure`, whenever the service's public URL (`SVC_PUBLIC_URL`) is HTTPS or the request came over HTTPS; `svc_console_session` over plain HTTP and answers who is signed in. A link works once, within its time to live. Like every state-changing console request, it must carry the `X-Svc-Console: 1` header and must not come from another site. No authentication.",
        request: Examples.signIn,
        response: Examples.consoleSession,
        errors: {
          400: "The token is not a sign-in link of this service (`LINK_INVALID`), or the body is invalid.",
          403: "No `X-Svc-Console` header, or a request from another site (`CROSS_SITE_REQUEST`).",
          410: "The link was used already (`LINK_USED`) or its time ran out (`LINK_EXPIRED`)."
        }
      })
    ),
    HttpApiEndpoint.post("signOut", "/v1/console/sign-out", {
      success: HttpApiSchema.NoContent,
      error: CrossSiteRequest
    }).pipe(
      documented({
        summary: "Sign out of the console",
        description:
          "Ends the console session of the console cookie at once (in every process) and clears the cookie. Answers 204 without a session too. Must carry `X-Svc-Console: 1`. No authentication.",
        errors: { 403: "No `X-Svc-Console` header, or a request from another site (`CROSS_SITE_REQUEST`)." }
      })
    )
  )
  .annotate(OpenApi.Title, "Console sign-in")
{}

const SessionIdParams = { session_id: Uuid }

export class ConsoleApi extends HttpApiGroup.make("console")
  .add(
    HttpApiEndpoint.get("listSessions", "/v1/console/sessions", {
      success: Schema.Struct({ sessions: Schema.Array(ConsoleSessionSummary) })
    }).pipe(
      requireScope("keys.manage", "The organization's console sessions that have not ended, newest first."),
      documented({ summary: "List console sessions", response: Examples.consoleSessionList })
    ),
    HttpApiEndpoint.delete("revokeSession", "/v1/console/sessions/:session_id", {
      params: SessionIdParams,
      success: HttpApiSchema.NoContent,
      error: NotFound
    }).pipe(
      requireScope(
        "keys.manage",
        "Ends a console session at once, in every process: its next request answers 401 and its open event streams end within `SVC_STREAM_AUTH_RECHECK`."
      ),
      documented({ summary: "Revoke a console session", errors: { 404: notFound("console session") } })
    )
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "Console")
{}

// ---------------------------------------------------------------------------
// API keys

export const ApiKey = Schema.Struct({
  id: Uuid,
  name: Schema.NullOr(Schema.String),
  key_prefix: Schema.String.annotate({
    description: "The key's first 12 characters (`svc_` and 8 more), to recognize it; never the key"
  }),
  scopes: Schema.Array(ScopeName),
  created_at: Timestamp,
  revoked_at: Schema.NullOr(Timestamp),
  created_by: Schema.NullOr(Schema.String).annotate({
    description:
      "Who made the key: `console:<name>` for a person signed in to the console (the key outlives that session), the id of the API key that made it, or null when made with the CLI"
  })
})
export type ApiKey = typeof ApiKey.Type

const CreateApiKey = Schema.Struct({
  name: Schema.optionalKey(Text.check(Schema.isMinLength(1), Schema.isMaxLength(200))),
  scopes: Schema.Array(ScopeName).check(Schema.isMinLength(1)).annotate({
    description: "The scopes of the new key; the caller must hold each of them"
  })
})

export class ApiKeysApi extends HttpApiGroup.make("apiKeys")
  .add(
    HttpApiEndpoint.get("list", "/v1/api-keys", {
      success: Schema.Struct({ keys: Schema.Array(ApiKey) })
    }).pipe(
      requireScope(
        "keys.manage",
        "The organization's API keys that are not revoked, newest first. Never the key itself."
      ),
      documented({ summary: "List API keys", response: Examples.apiKeyList })
    ),
    HttpApiEndpoint.post("create", "/v1/api-keys", {
      payload: CreateApiKey,
      success: Schema.Struct({
        api_key: ApiKey,
        key: Schema.String.annotate({ description: "The key itself (`svc_...`): shown only in this answer" })
      }).pipe(HttpApiSchema.status(201)),
      error: [InsufficientScope, LimitReached, InvalidRequest]
    }).pipe(
      requireScope(
        "keys.manage",
        "Creates an API key with the chosen scopes; the key is in this answer only (only its SHA-256 is stored). The caller can grant only scopes it holds itself. The key records who made it (`created_by`), and is that person's for good: a decision with it counts as theirs (one person, one vote: docs/approvals.md, \"Who counts as whom\"), and ending a console person's access (`console revoke --person`) revokes it. A key made in a console session keeps working after that session ends, until it is revoked. An organization has at most `SVC_MAX_API_KEYS_PER_ORG` keys that are not revoked (default 1000)."
      ),
      documented({
        summary: "Create an API key",
        request: Examples.createApiKey,
        response: Examples.createdApiKey,
        errors: {
          403: "The caller lacks `keys.manage`, or one of the requested scopes (`INSUFFICIENT_SCOPE` names it).",
          409: "The organization has `SVC_MAX_API_KEYS_PER_ORG` keys already (`LIMIT_REACHED`)."
        }
      })
    ),
    HttpApiEndpoint.delete("revoke", "/v1/api-keys/:key_id", {
      params: { key_id: Uuid },
      success: ApiKey,
      error: NotFound
    }).pipe(
      requireScope(
        "keys.manage",
        "Revokes an API key at once, in every process; its open event streams end within `SVC_STREAM_AUTH_RECHECK`. Revoking a revoked key returns it unchanged."
      ),
      documented({
        summary: "Revoke an API key",
        response: Examples.revokedApiKey,
        errors: { 404: notFound("API key") }
      })
    )
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "API keys")
{}
