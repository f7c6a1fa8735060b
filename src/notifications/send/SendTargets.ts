/**
 * The send targets: what the sender needs of one endpoint (URL, state,
 * signing secrets, custom headers, credentials), looked up once for all the
 * sends that want it meanwhile and kept in the mirror (`TargetMirror.ts`,
 * with its sweep). `send/` owns them: the endpoints' API (`Endpoints.ts`)
 * only tells them of a change made through this process (`forget`).
 */
import { PgClient } from "@effect/sql-pg"
import { Cause, Clock, Context, Deferred, Effect, Layer, Redacted, Schema } from "effect"
import type { EndpointAuthView } from "../../api/EndpointAuth.ts"
import type { ClientCertificate } from "../../outbound/Request.ts"
import { JsonColumn, rowsOf } from "../../platform/Rows.ts"
import { endpointUrlOwner, readReceiverUrl } from "../../secrets/ReceiverUrls.ts"
import { type SecretOwner, SecretStore } from "../../secrets/SecretStore.ts"
import { authOwner, CERTIFICATE, certificateOwner, CLIENT_SECRET, PRIVATE_KEY, TOKEN_URL } from "../auth/StoredAuth.ts"
import type { OAuthTarget } from "../auth/Tokens.ts"
import { type Lookup, makeSendTargetMirror, SEND_TARGET_TTL_MS, STAMP, sweepOnce } from "./TargetMirror.ts"

export interface SendTarget {
  readonly url: string
  readonly active: boolean
  readonly deactivatedReason: string | null
  readonly secrets: ReadonlyArray<string>
  /** The endpoint's custom headers, names lower-case (docs/webhooks.md, "Custom headers"). */
  readonly headers: ReadonlyArray<readonly [string, string]>
  /** OAuth 2.0 client credentials: a bearer token is fetched for each send (`auth/Tokens.ts`). */
  readonly oauth?: OAuthTarget | undefined
  /** The client certificate presented for mutual TLS. */
  readonly clientCertificate?: ClientCertificate | undefined
}

/**
 * The bound an endpoint's deliveries share with the organization's other
 * endpoints on the same destination host (and port): `SVC_WEBHOOK_PER_HOST`
 * in the worker, which reads it with each claim (`DeliveryQueue.setGroup`,
 * written when the endpoint is created; migration 0960 derives it alike).
 */
export const hostGroup = (orgId: string, url: string): string | null => {
  const host = URL.parse(url)?.host
  return host === undefined || host === "" ? null : `${orgId} ${host}`
}

export const endpointOwner = (orgId: string, id: string): SecretOwner => ({ orgId, kind: "notification_endpoint", id })
/** The owner of an endpoint's custom header values, one secret per header, named as given. */
export const endpointHeaderOwner = (orgId: string, id: string): SecretOwner => ({
  orgId,
  kind: "notification_endpoint_header",
  id
})

const TargetRows = rowsOf(
  "notification_endpoints",
  Schema.Struct({
    url: Schema.String,
    active: Schema.Boolean,
    deactivated_reason: Schema.NullOr(Schema.String),
    header_names: JsonColumn(Schema.Array(Schema.String)),
    auth: JsonColumn(Schema.NullOr(Schema.Any)),
    has_certificate: Schema.Boolean,
    stamp: Schema.String
  })
)

type Stored = ReadonlyArray<{ readonly id: string; readonly name: string; readonly value: Redacted.Redacted<string> }>

const named = (stored: Stored, name: string) => stored.find((secret) => secret.name === name)

/**
 * The OAuth credentials of an endpoint: its `auth` column and its secrets
 * (the token cache's key holds the client secret's id).
 */
const oauthTarget = (key: string, column: NonNullable<EndpointAuthView>, stored: Stored): OAuthTarget | undefined => {
  const tokenUrl = named(stored, TOKEN_URL)
  const secret = named(stored, CLIENT_SECRET)
  if (tokenUrl === undefined || secret === undefined) return undefined
  return {
    key: `${key}:${secret.id}`,
    tokenUrl: Redacted.value(tokenUrl.value),
    clientId: column.client_id,
    clientSecret: Redacted.value(secret.value),
    scope: column.scope,
    audience: column.audience,
    method: column.auth_method
  }
}

const clientCertificate = (stored: Stored): ClientCertificate | undefined => {
  const certificate = named(stored, CERTIFICATE)
  const key = named(stored, PRIVATE_KEY)
  if (certificate === undefined || key === undefined) return undefined
  return { id: key.id, certificate: Redacted.value(certificate.value), privateKey: Redacted.value(key.value) }
}

/** Lookups, the mirror and its sweep, while the layer's scope lasts. */
const make = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient
  const secrets = yield* SecretStore
  const mirror = makeSendTargetMirror<SendTarget>(yield* Clock.Clock, SEND_TARGET_TTL_MS)
  /** The signing secrets in use now, newest first (several during a rotation overlap). */
  const signingSecrets = Effect.fn("SendTargets.signingSecrets")(function*(orgId: string, id: string) {
    const stored = yield* secrets.list(endpointOwner(orgId, id))
    return stored.map((secret) => Redacted.value(secret.value))
  })
  const read = Effect.fnUntraced(function*(key: string, lookup: Lookup<SendTarget>) {
    const [orgId, id] = key.split(":") as [string, string]
    const row = yield* TargetRows.one(sql`
      SELECT url, active, deactivated_reason, header_names, auth, client_certificate IS NOT NULL AS has_certificate,
             ${sql.literal(STAMP)} AS stamp
      FROM notification_endpoints e WHERE id = ${id} AND org_id = ${orgId}
    `)
    const url = row === undefined
      ? undefined
      : yield* readReceiverUrl(endpointUrlOwner(orgId, id), row.url).pipe(Effect.provideService(SecretStore, secrets))
    // No row, or deleted since it was read.
    if (row === undefined || url === undefined) return undefined
    const target: SendTarget = {
      url,
      active: row.active,
      deactivatedReason: row.deactivated_reason,
      secrets: yield* signingSecrets(orgId, id),
      // Read only when it has some: most endpoints pay no lookup for them.
      headers: row.header_names.length === 0
        ? []
        : (yield* secrets.list(endpointHeaderOwner(orgId, id))).map((h) =>
          [h.name.toLowerCase(), Redacted.value(h.value)] as const
        ),
      // Likewise credentials and certificates.
      oauth: row.auth === null ? undefined : oauthTarget(key, row.auth, yield* secrets.list(authOwner(orgId, id))),
      clientCertificate: row.has_certificate
        ? clientCertificate(yield* secrets.list(certificateOwner(orgId, id)))
        : undefined
    }
    mirror.found(key, lookup, target, row.stamp)
    return target
  })
  // Concurrent sends to one endpoint share one lookup (no stampede when its entry lapses).
  const lookUp = (key: string): Effect.Effect<SendTarget | undefined> =>
    Effect.suspend(() => {
      const running = mirror.running(key)
      if (running !== undefined) return Deferred.await(running.answer)
      const lookup = mirror.began(key)
      return read(key, lookup).pipe(Effect.onExit((exit) =>
        Effect.andThen(Deferred.done(lookup.answer, exit), Effect.sync(() => mirror.ended(key, lookup)))
      ))
    })
  // Sweeps while the scope lasts; a failed sweep is logged and the next one tries again.
  yield* Effect.forkScoped(
    Effect.forever(
      Effect.andThen(
        Effect.sleep(SEND_TARGET_TTL_MS / 2),
        sweepOnce(sql, mirror).pipe(
          Effect.catchCause((cause) =>
            Cause.hasInterruptsOnly(cause)
              ? Effect.failCause(cause)
              : Effect.logWarning("the send-target sweep failed; entries lapse until the next one", Cause.squash(cause))
          ),
          Effect.withTracerEnabled(false)
        )
      )
    )
  )
  return SendTargets.of({
    get: (orgId, id) => {
      const key = `${orgId}:${id}`
      const known = mirror.now(key)
      return known !== undefined ? Effect.succeed(known) : lookUp(key)
    },
    now: (orgId, id) => mirror.now(`${orgId}:${id}`),
    forget: (orgId, id) => Effect.sync(() => mirror.changed(`${orgId}:${id}`))
  })
})

export class SendTargets extends Context.Service<SendTargets, {
  /** What the sender needs for one endpoint, or `undefined` when it is gone (from the mirror, else looked up). */
  readonly get: (orgId: string, id: string) => Effect.Effect<SendTarget | undefined>
  /** `get` without an effect, for sends without a fiber: `undefined` when this process knows nothing fresh. */
  readonly now: (orgId: string, id: string) => SendTarget | undefined
  /** A change made through this process (`Endpoints.ts`, `EndpointHealth.ts`) drops the endpoint's entry at once. */
  readonly forget: (orgId: string, id: string) => Effect.Effect<void>
}>()("svc/notifications/SendTargets") {
  static readonly layer = Layer.effect(SendTargets, make)
}
