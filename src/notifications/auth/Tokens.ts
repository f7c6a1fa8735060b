/**
 * Access tokens of endpoints that want OAuth 2.0 client credentials
 * (docs/webhooks.md, "Endpoint authentication"): fetched from the
 * receiver's token endpoint through the outbound guard (the token URL's
 * address checked again at every fetch, no redirects followed, the answer
 * read up to `SVC_WEBHOOK_TOKEN_MAX_BYTES` and within what is left of the
 * attempt's deadline), and kept until shortly before they expire.
 *
 * The cache is this process's own: each svc process fetches its own token
 * for an endpoint (a token is not a secret another process needs), so
 * nothing is shared through the database. Its key holds the id of the
 * stored client secret, which a change of the credentials replaces: a
 * token fetched with old credentials is never used with new ones. Sends
 * that want a token while one is being fetched for their endpoint wait for
 * that fetch rather than start another.
 *
 * A failure says what went wrong (the status, the OAuth error code when it
 * is a registered one, or the network failure) and never the client
 * secret, the token or the token endpoint's body.
 */
import { Cause, Clock, Context, Deferred, Duration, Effect, Exit, Layer } from "effect"
import { OutboundFailure, OutboundHttp } from "../../outbound/OutboundHttp.ts"
import { SvcConfig } from "../../platform/Config.ts"

/** What a token request needs; `key` names the endpoint and the version of its credentials. */
export interface OAuthTarget {
  readonly key: string
  readonly tokenUrl: string
  readonly clientId: string
  readonly clientSecret: string
  readonly scope: string | undefined
  readonly audience: string | undefined
  readonly method: "client_secret_basic" | "client_secret_post"
}

/** How long a token whose answer gave no `expires_in` is used. */
export const DEFAULT_LIFETIME_SECONDS = 300
/** A token is fetched again this long before it expires: 10 % of its lifetime, at least 30 s, at most half of it. */
export const refreshMarginSeconds = (lifetime: number) => Math.min(lifetime / 2, Math.max(30, lifetime / 10))

/** Entries kept; past this the cache starts afresh. */
const KEPT = 10_000

/** OAuth 2.0 error codes (RFC 6749, section 5.2) quoted in a failure; any other text of the answer is not. */
const REGISTERED_ERRORS = new Set([
  "invalid_request",
  "invalid_client",
  "invalid_grant",
  "unauthorized_client",
  "unsupported_grant_type",
  "invalid_scope"
])

/** A token svc can put in a header as it is (RFC 6750's b64token, and a bit more): visible ASCII, bounded. */
const USABLE_TOKEN = /^[\x21-\x7E]{1,8192}$/

const failure = (message: string) =>
  new OutboundFailure({ reason: "network", message: `OAuth token request failed: ${message}` })

/** The form of the token request and its headers (RFC 6749, sections 2.3.1 and 4.4.2). */
export const tokenRequest = (target: OAuthTarget) => {
  const form = new URLSearchParams({ grant_type: "client_credentials" })
  if (target.scope !== undefined) form.set("scope", target.scope)
  if (target.audience !== undefined) form.set("audience", target.audience)
  const headers: Record<string, string> = {
    "content-type": "application/x-www-form-urlencoded",
    accept: "application/json"
  }
  if (target.method === "client_secret_post") {
    form.set("client_id", target.clientId)
    form.set("client_secret", target.clientSecret)
  } else {
    // Each part form-encoded first, as section 2.3.1 says.
    const encode = (value: string) => new URLSearchParams({ v: value }).toString().slice(2)
    headers["authorization"] = `Basic ${
      Buffer.from(`${encode(target.clientId)}:${encode(target.clientSecret)}`).toString("base64")
    }`
  }
  return { headers, body: form.toString() }
}

/** The token and its lifetime in seconds from a token endpoint's answer, or what is wrong with it. */
export const parseTokenAnswer = (status: number, body: Uint8Array, truncated: boolean) => {
  let parsed: unknown
  try {
    parsed = truncated ? undefined : JSON.parse(new TextDecoder().decode(body))
  } catch {
    parsed = undefined
  }
  const fields = typeof parsed === "object" && parsed !== null ? parsed as Record<string, unknown> : {}
  if (status < 200 || status >= 300) {
    const code = typeof fields["error"] === "string" && REGISTERED_ERRORS.has(fields["error"])
      ? ` (${fields["error"]})`
      : ""
    return failure(
      `the token endpoint answered HTTP ${status}${
        status >= 300 && status < 400 ? ", redirects are not followed" : ""
      }${code}`
    )
  }
  if (truncated) return failure("the token endpoint's answer is over SVC_WEBHOOK_TOKEN_MAX_BYTES")
  const token = fields["access_token"]
  if (typeof token !== "string" || !USABLE_TOKEN.test(token)) {
    return failure(
      "the token endpoint's answer has no usable access_token (JSON, visible ASCII, at most 8192 characters)"
    )
  }
  const type = fields["token_type"]
  if (type !== undefined && (typeof type !== "string" || type.toLowerCase() !== "bearer")) {
    return failure("the token endpoint's answer has a token_type other than Bearer")
  }
  const expiresIn = Number(fields["expires_in"] ?? DEFAULT_LIFETIME_SECONDS)
  return { token, lifetime: Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn : DEFAULT_LIFETIME_SECONDS }
}

interface Entry {
  readonly token: string
  readonly until: number
}

export class EndpointTokens extends Context.Service<EndpointTokens, {
  /**
   * A token for `target`, from the cache or fetched within `timeoutMs`.
   * `rejected`: the receiver refused this token (401); it is not answered
   * again, a new one is fetched.
   */
  readonly token: (
    target: OAuthTarget,
    orgId: string,
    timeoutMs: number,
    rejected?: string
  ) => Effect.Effect<string, OutboundFailure>
}>()("svc/notifications/EndpointTokens") {
  static readonly layer = Layer.effect(
    EndpointTokens,
    Effect.gen(function*() {
      const outbound = yield* OutboundHttp
      const config = yield* SvcConfig
      const known = new Map<string, Entry>()
      const inFlight = new Map<string, Deferred.Deferred<Entry, OutboundFailure>>()

      const fetch = Effect.fn("EndpointTokens.fetch")(function*(target: OAuthTarget, orgId: string, timeoutMs: number) {
        const request = tokenRequest(target)
        const answer = yield* outbound.send({
          url: target.tokenUrl,
          method: "POST",
          headers: request.headers,
          body: request.body,
          timeout: Duration.millis(timeoutMs),
          maxResponseBytes: config.webhookTokenMaxBytes,
          partition: orgId,
          orgId
        }).pipe(Effect.mapError((failed) => failure(failed.message)))
        const parsed = parseTokenAnswer(answer.status, answer.body, answer.truncated)
        if (parsed instanceof OutboundFailure) return yield* parsed
        const now = yield* Clock.currentTimeMillis
        return { token: parsed.token, until: now + (parsed.lifetime - refreshMarginSeconds(parsed.lifetime)) * 1000 }
      })

      const token = (target: OAuthTarget, orgId: string, timeoutMs: number, rejected?: string) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const entry = known.get(target.key)
          if (entry !== undefined && entry.until > now && entry.token !== rejected) return entry.token
          if (entry !== undefined) known.delete(target.key)
          const running = inFlight.get(target.key)
          if (running !== undefined) {
            const joined = yield* Deferred.await(running)
            if (joined.token !== rejected) return joined.token
          }
          const deferred = Deferred.makeUnsafe<Entry, OutboundFailure>()
          inFlight.set(target.key, deferred)
          const fetched = yield* fetch(target, orgId, timeoutMs).pipe(
            Effect.onExit((exit) =>
              // The sends that joined fail as this one does; when it was
              // interrupted (its own attempt ended), they are told so and
              // fail their attempt rather than being interrupted with it.
              Effect.andThen(
                Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)
                  ? Deferred.fail(deferred, failure("the token request was interrupted"))
                  : Deferred.done(deferred, exit),
                Effect.sync(() => {
                  if (inFlight.get(target.key) === deferred) inFlight.delete(target.key)
                })
              )
            )
          )
          if (known.size >= KEPT) known.clear()
          known.set(target.key, fetched)
          return fetched.token
        })

      return EndpointTokens.of({ token })
    })
  )
}
