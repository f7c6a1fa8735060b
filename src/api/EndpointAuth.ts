/**
 * How svc authenticates itself to a notification endpoint, besides signing
 * every delivery (docs/webhooks.md, "Endpoint authentication"): an OAuth 2.0
 * client-credentials grant (`auth`: svc fetches a token from the receiver's
 * token endpoint and sends it as `Authorization: Bearer`) and a client
 * certificate for mutual TLS (`tls_client_certificate`). What is written is
 * secret (the client secret, the private key, the token URL); what is read
 * back is a hint only.
 */
import { Schema } from "effect"
import { Text, Timestamp, UrlOf } from "./Common.ts"

/** Most bytes of a PEM certificate chain or private key given for mutual TLS. */
const MAX_PEM_CHARACTERS = 32_768

const bounded = (max: number, description: string) =>
  Text.check(Schema.isMinLength(1), Schema.isMaxLength(max)).annotate({ description })

const ClientAuthMethod = Schema.Literals(["client_secret_basic", "client_secret_post"]).annotate({
  description:
    "How svc presents the client credentials to the token endpoint (RFC 6749, section 2.3.1): `client_secret_basic` (default), HTTP Basic; `client_secret_post`, in the form body"
})

/**
 * The kind of credentials, behind `suspend`: a plain literal member would
 * make the object a tagged variant of `EndpointAuthInput`'s union, and an
 * unknown type would then fail the union as a whole, naming `auth`; a
 * suspended one is checked as a member, naming `auth.type`. The document
 * shows the same `enum`.
 */
const CredentialsType = Schema.suspend(() => Schema.Literal("oauth2_client_credentials"))

/**
 * The token URL's schema rules (an absolute http or https URL, at most
 * 2048 characters) are answered `INVALID_REQUEST` like any member's; that
 * it uses https and is a public address is the service's rule, checked
 * last and answered `INVALID_URL` (`src/notifications/auth/StoredAuth.ts`).
 * It is the last member, so a refusal names a member of the object's own
 * first.
 */
const OAuthClientCredentials = Schema.Struct({
  type: CredentialsType,
  client_id: bounded(255, "The client id svc presents to the token endpoint"),
  client_secret: bounded(1024, "The client secret: encrypted at rest, never returned"),
  scope: Schema.optionalKey(bounded(1000, "The `scope` parameter of the token request (space-separated scopes)")),
  audience: Schema.optionalKey(bounded(1000, "The `audience` parameter of the token request (Auth0, Okta and others)")),
  auth_method: Schema.optionalKey(ClientAuthMethod),
  token_url: UrlOf(["https", "http"], "Expected an https URL", "INVALID_REQUEST").annotate({
    description:
      "The receiver's OAuth 2.0 token endpoint: a public HTTPS address, checked like the endpoint's URL when set and again at every token request (redirects are not followed). Secret: never returned."
  })
}).annotate({
  description:
    "OAuth 2.0 client credentials (RFC 6749, section 4.4): before sending, svc gets an access token from `token_url` and sends it as `Authorization: Bearer`; the token is reused until shortly before its `expires_in`, and fetched again once when the receiver answers 401."
})

/** `auth` on create and PATCH: the credentials, or null for none. */
export const EndpointAuthInput = Schema.NullOr(OAuthClientCredentials).annotate({
  description:
    "How svc authenticates to the receiver besides signing: `oauth2_client_credentials`, or null for none (the default). On PATCH the whole object is given again (the secret is write-only); null removes it; absent: unchanged. Not for broker destinations."
})

export const ClientCertificateInput = Schema.NullOr(Schema.Struct({
  certificate: bounded(
    MAX_PEM_CHARACTERS,
    "The client certificate (PEM), optionally followed by its intermediate certificates; valid now, with the key below"
  ),
  private_key: bounded(
    MAX_PEM_CHARACTERS,
    "Its private key (unencrypted PEM, PKCS#8, PKCS#1 or SEC1): encrypted at rest, never returned"
  )
})).annotate({
  description:
    "A client certificate and its key, presented for mutual TLS on every connection to the receiver, or null for none. Checked when set (it parses, the key matches, it has not expired: else 400 naming the field). On PATCH given whole again; null removes it; absent: unchanged. Not for broker destinations."
})

/** What a read shows of `auth`: never the secret, nor the token URL beyond its hint. */
export const EndpointAuthView = Schema.NullOr(Schema.Struct({
  type: Schema.Literal("oauth2_client_credentials"),
  token_url_hint: Schema.String.annotate({ description: "Masked token URL (scheme, host, port; `/…` for any path)" }),
  client_id: Schema.String,
  scope: Schema.optionalKey(Schema.String),
  audience: Schema.optionalKey(Schema.String),
  auth_method: ClientAuthMethod
})).annotate({ description: "The endpoint's OAuth 2.0 client credentials without the secret; null: none" })
export type EndpointAuthView = typeof EndpointAuthView.Type

/** What a read shows of the client certificate: never the key. */
export const ClientCertificateView = Schema.NullOr(Schema.Struct({
  subject: Schema.String,
  issuer: Schema.String,
  fingerprint_sha256: Schema.String.annotate({ description: "SHA-256 of the certificate (DER), colon-separated hex" }),
  not_before: Timestamp,
  not_after: Timestamp.annotate({
    description:
      "When it expires: `endpoint.certificate_expiring` is sent `SVC_WEBHOOK_CERTIFICATE_NOTICE` before (14 days by default)"
  })
})).annotate({ description: "The client certificate presented for mutual TLS, without its key; null: none" })
export type ClientCertificateView = typeof ClientCertificateView.Type
