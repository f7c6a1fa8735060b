/**
 * An endpoint's authentication as it is stored (docs/webhooks.md, "Endpoint
 * authentication"): what a create or PATCH gives is checked here (the token
 * URL like the endpoint's own URL, the certificate and key by
 * `ClientCertificate.ts`, neither for a broker destination), then split into
 * the column a read shows (`auth`, `client_certificate`: hints only) and
 * the secrets sealed in the secret store (token URL, client secret,
 * certificate, private key), one owner for each kind so that either can be
 * replaced alone.
 */
import { Clock, Effect, Redacted } from "effect"
import { InvalidUrl } from "../../api/Deliveries.ts"
import type { ClientCertificateView, EndpointAuthView } from "../../api/EndpointAuth.ts"
import { InvalidHeaders, InvalidRequest } from "../../api/Errors.ts"
import type { UnsafeUrl } from "../../outbound/OutboundHttp.ts"
import type { CheckedUrl } from "../../outbound/Request.ts"
import type { SecretOwner, SecretStore } from "../../secrets/SecretStore.ts"
import { checkClientCertificate } from "./ClientCertificate.ts"

/** `auth` as a create or PATCH gives it. */
export interface AuthInput {
  readonly type: "oauth2_client_credentials"
  readonly token_url: string
  readonly client_id: string
  readonly client_secret: string
  readonly scope?: string | undefined
  readonly audience?: string | undefined
  readonly auth_method?: "client_secret_basic" | "client_secret_post" | undefined
}

export interface CertificateInput {
  readonly certificate: string
  readonly private_key: string
}

export const authOwner = (orgId: string, id: string): SecretOwner => ({ orgId, kind: "notification_endpoint_auth", id })
export const certificateOwner = (orgId: string, id: string): SecretOwner => ({
  orgId,
  kind: "notification_endpoint_certificate",
  id
})

/** Names of the secrets under those owners. */
export const TOKEN_URL = "token_url"
export const CLIENT_SECRET = "client_secret"
export const CERTIFICATE = "certificate"
export const PRIVATE_KEY = "private_key"

/** What to store of a change: `undefined` unchanged, null removed, else the column and the secrets. */
export type Prepared<View> = undefined | null | {
  readonly column: NonNullable<View>
  readonly secrets: ReadonlyArray<readonly [string, string]>
  readonly expiresAt?: Date
}

/** Refuses authentication for a broker destination (`scheme` without its colon). */
export const refuseForBroker = (scheme: string, auth: unknown, certificate: unknown) => {
  if (scheme === "https") return Effect.void
  const field = auth !== undefined && auth !== null
    ? "auth"
    : certificate !== undefined && certificate !== null
    ? "tls_client_certificate"
    : undefined
  if (field === undefined) return Effect.void
  return Effect.fail(
    new InvalidRequest({
      field,
      detail: `${field} is for HTTPS endpoints only; ` +
        `a broker destination (${scheme}) authenticates with the credentials in its URL.`
    })
  )
}

/**
 * A bearer token replaces the `Authorization` header: an endpoint with
 * `auth` has no custom header of that name (`headerNames`: the names the
 * endpoint will have).
 */
export const refuseAuthorizationHeader = (hasAuth: boolean, headerNames: ReadonlyArray<string>) => {
  const clash = headerNames.find((name) => name.toLowerCase() === "authorization")
  if (!hasAuth || clash === undefined) return Effect.void
  const field = `headers.${clash}`
  const message = "svc sends the OAuth bearer token in this header; remove the custom header or the endpoint's auth"
  return Effect.fail(new InvalidHeaders({ field, errors: [{ field, message }], detail: `${field}: ${message}.` }))
}

/** Checks `auth` (its token URL as the endpoint's own URL is checked) and splits it. */
export const prepareAuth = (
  input: AuthInput | null | undefined,
  check: (url: string) => Effect.Effect<CheckedUrl, UnsafeUrl>
): Effect.Effect<Prepared<EndpointAuthView>, InvalidUrl> =>
  Effect.gen(function*() {
    if (input === undefined || input === null) return input
    const checked = yield* check(input.token_url).pipe(
      Effect.mapError((unsafe) =>
        new InvalidUrl({ field: "auth.token_url", detail: `auth.token_url: ${unsafe.message}` })
      )
    )
    return {
      column: {
        type: input.type,
        token_url_hint: checked.urlHint,
        client_id: input.client_id,
        ...(input.scope === undefined ? {} : { scope: input.scope }),
        ...(input.audience === undefined ? {} : { audience: input.audience }),
        auth_method: input.auth_method ?? "client_secret_basic"
      },
      secrets: [[TOKEN_URL, checked.url], [CLIENT_SECRET, input.client_secret]]
    }
  })

/** Checks the certificate and key now (the service's clock) and splits them. */
export const prepareCertificate = (
  input: CertificateInput | null | undefined
): Effect.Effect<Prepared<ClientCertificateView>, InvalidRequest> =>
  Effect.gen(function*() {
    if (input === undefined || input === null) return input
    const checked = checkClientCertificate(input.certificate, input.private_key, yield* Clock.currentTimeMillis)
    if ("field" in checked) {
      return yield* new InvalidRequest({ field: checked.field, detail: `${checked.field}: ${checked.message}.` })
    }
    return {
      column: checked.view,
      secrets: [[CERTIFICATE, checked.certificate], [PRIVATE_KEY, checked.privateKey]],
      expiresAt: new Date(checked.view.not_after)
    }
  })

/** Writes a prepared change's secrets under `owner` (removing the earlier ones); in the caller's transaction. */
export const writeSecrets = <View>(secrets: SecretStore["Service"], owner: SecretOwner, prepared: Prepared<View>) =>
  Effect.gen(function*() {
    if (prepared === undefined) return
    yield* secrets.removeOwner(owner)
    if (prepared === null) return
    for (const [name, value] of prepared.secrets) yield* secrets.put(owner, name, Redacted.make(value))
  })
