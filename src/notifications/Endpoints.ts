/**
 * Notification endpoints: the organization's webhook receivers, their
 * signing secrets (in the secret store, sealed with the master key); the
 * reviewer address is `ReviewerAddress.ts`.
 *
 * The full URL, the secrets and custom header values never leave this
 * service through the API: the secret is answered once, at creation or
 * rotation; of the headers only their names are listed.
 *
 * What a create or PATCH says is checked here: its custom headers against
 * the headers svc sets (docs/webhooks.md, "Endpoints", "Custom headers"), a
 * 400 naming the field at fault. The event types and their count are the
 * schema's rule (`EventSelection` in src/api/Notifications.ts).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Redacted } from "effect"
import { InvalidUrl } from "../api/Deliveries.ts"
import { headersRefused, type InvalidHeaders, type InvalidRequest, LimitReached, NotFound } from "../api/Errors.ts"
import type { EndpointOrdering, InvalidWebhookEvents, NotificationEndpoint } from "../api/Notifications.ts"
import { parseEndpointUrl } from "../brokers/BrokerUrl.ts"
import { Topics, Wakeups } from "../database/Wakeups.ts"
import { DeliveryQueue } from "../deliveries/DeliveryQueue.ts"
import { failingStreak } from "../deliveries/Targets.ts"
import { checkHeaders } from "../outbound/HeaderRules.ts"
import { OutboundHttp } from "../outbound/OutboundHttp.ts"
import { SvcConfig } from "../platform/Config.ts"
import { newId } from "../platform/Ids.ts"
import { countForCap } from "../platform/OrgLimits.ts"
import { iso } from "../platform/Time.ts"
import { endpointUrlOwner, SEALED_URL_COLUMN, URL_SECRET } from "../secrets/ReceiverUrls.ts"
import { SecretStore } from "../secrets/SecretStore.ts"
import { writeCertificateNotices } from "./auth/CertificateNotices.ts"
import {
  type AuthInput,
  authOwner,
  type CertificateInput,
  certificateOwner,
  prepareAuth,
  prepareCertificate,
  refuseAuthorizationHeader,
  refuseForBroker,
  writeSecrets
} from "./auth/StoredAuth.ts"
import {
  columns,
  type EndpointRow,
  EndpointRows,
  eventSelection,
  filterColumn,
  headerNames,
  healthColumns,
  jsonOrNull,
  toEndpoint,
  withHealth
} from "./EndpointRows.ts"
import { rotateSigningSecret } from "./SecretRotation.ts"
import { activeEndpoint } from "./send/EndpointHealth.ts"
import { endpointHeaderOwner, endpointOwner, hostGroup, SendTargets } from "./send/SendTargets.ts"
import { newSigningSecret, OWN_HEADERS } from "./send/Signing.ts"

export interface EndpointChange {
  readonly events?: ReadonlyArray<string> | undefined
  /** `undefined`: unchanged; null: every action class. */
  readonly action_classes?: ReadonlyArray<string> | null | undefined
  /** `undefined`: unchanged. */
  readonly ordering?: EndpointOrdering | undefined
  /** `undefined`: unchanged; otherwise the whole new set (`{}`: none). */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** `undefined`: unchanged; null: unlimited. */
  readonly rate_limit?: number | null | undefined
  /** `undefined`: unchanged; null: none; otherwise the whole new credentials. */
  readonly auth?: AuthInput | null | undefined
  /** `undefined`: unchanged; null: none. */
  readonly tls_client_certificate?: CertificateInput | null | undefined
}

/** A create: what a change may say (given or not), and the URL. */
export interface EndpointInput extends EndpointChange {
  readonly url: string
}

/** The custom headers as given, or `INVALID_HEADERS` naming each refused one (never its value). */
const checkCustomHeaders = (headers: Readonly<Record<string, string>> | undefined) => {
  if (headers === undefined) return Effect.succeed(undefined)
  const verdict = checkHeaders(headers, OWN_HEADERS)
  return verdict._tag === "Refused" ? Effect.fail(headersRefused(verdict)) : Effect.succeed(verdict.headers)
}

/** Replaces the endpoint's custom header values (sealed, one secret each); in the caller's transaction. */
const writeHeaders = Effect.fnUntraced(function*(
  secrets: SecretStore["Service"],
  orgId: string,
  id: string,
  headers: ReadonlyArray<readonly [string, string]>
) {
  const owner = endpointHeaderOwner(orgId, id)
  yield* secrets.removeOwner(owner)
  for (const [name, value] of headers) yield* secrets.put(owner, name, Redacted.make(value))
})

export class NotificationEndpoints extends Context.Service<NotificationEndpoints, {
  readonly create: (
    orgId: string,
    keyId: string,
    input: EndpointInput
  ) => Effect.Effect<
    { readonly endpoint: NotificationEndpoint; readonly secret: string },
    InvalidUrl | InvalidWebhookEvents | InvalidHeaders | InvalidRequest | LimitReached
  >
  readonly list: (orgId: string) => Effect.Effect<ReadonlyArray<NotificationEndpoint>>
  /** The row, or `NotFound` when absent in this organization. */
  readonly find: (orgId: string, id: string) => Effect.Effect<EndpointRow, NotFound>
  /** Changes what is given (events, filter), and reactivates the endpoint. */
  readonly update: (
    orgId: string,
    id: string,
    change: EndpointChange
  ) => Effect.Effect<
    NotificationEndpoint,
    NotFound | InvalidUrl | InvalidWebhookEvents | InvalidHeaders | InvalidRequest
  >
  /** Deletes the row, its secrets and the queue's target (its undelivered deliveries fail), in one transaction; answers the deleted row. */
  readonly remove: (orgId: string, id: string) => Effect.Effect<EndpointRow, NotFound>
  readonly rotateSecret: (
    orgId: string,
    id: string,
    overlapSeconds: number | undefined,
    expirePrevious: "latest" | "all" | undefined
  ) => Effect.Effect<{
    readonly endpoint: NotificationEndpoint
    readonly secret: string
    readonly previous_secret_expires_at: string
  }, NotFound | LimitReached>
}>()("svc/notifications/NotificationEndpoints") {
  static readonly layer = Layer.effect(
    NotificationEndpoints,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const outbound = yield* OutboundHttp
      const secrets = yield* SecretStore
      const config = yield* SvcConfig
      const queue = yield* DeliveryQueue
      const wakeups = yield* Wakeups
      /** A certificate just set may be near its end already: told at once, with the change. */
      const noticeIfDue = (id: string, certificate: unknown) =>
        certificate === undefined || certificate === null
          ? Effect.succeed(0)
          : writeCertificateNotices(sql, config.webhookCertificateNotice, id)
      const woken = (written: number) => written > 0 ? wakeups.signal(Topics.events) : Effect.void
      const { forget } = yield* SendTargets

      const create = Effect.fn("NotificationEndpoints.create")(function*(
        orgId: string,
        keyId: string,
        input: EndpointInput
      ) {
        const events = eventSelection(input.events)
        const headers = yield* checkCustomHeaders(input.headers)
        const checked = yield* outbound.check(input.url, orgId, parseEndpointUrl).pipe(
          Effect.mapError((unsafe) => new InvalidUrl({ field: "url", detail: unsafe.message }))
        )
        yield* refuseForBroker(new URL(checked.url).protocol.slice(0, -1), input.auth, input.tls_client_certificate)
        const hasAuth = input.auth !== undefined && input.auth !== null
        yield* refuseAuthorizationHeader(hasAuth, (headers ?? []).map(([name]) => name))
        const auth = yield* prepareAuth(input.auth, (url) => outbound.check(url, orgId))
        const certificate = yield* prepareCertificate(input.tls_client_certificate)
        const secret = newSigningSecret()
        const limit = config.maxEndpointsPerOrg
        let noticed = 0
        // The endpoint's row, the queue's side of its ordering and its secrets, in
        // one transaction. Each endpoint multiplies every event into one more
        // signed POST: the number per organization is capped, counted under the
        // organization's row lock so concurrent creates cannot pass it.
        const row = yield* sql.withTransaction(Effect.gen(function*() {
          if ((yield* countForCap(sql, orgId, "notification_endpoints", limit)) >= limit) {
            return yield* new LimitReached({
              limit: "SVC_MAX_ENDPOINTS_PER_ORG",
              limit_value: limit,
              detail:
                `The organization already has ${limit} notification endpoints, the most allowed (SVC_MAX_ENDPOINTS_PER_ORG); delete one first.`
            })
          }
          const id = newId()
          const row = yield* EndpointRows.returned(sql`
            INSERT INTO notification_endpoints (id, org_id, url, url_hint, events, created_by, action_classes, ordering,
                                                header_names, rate_limit, auth, client_certificate, certificate_expires_at)
            VALUES (${id}, ${orgId}, ${SEALED_URL_COLUMN}, ${checked.urlHint}, ${sql.json(events)}, ${keyId},
                    ${filterColumn(input.action_classes)}::jsonb, ${input.ordering ?? "concurrent"}, ${
            headerNames(headers)
          }::jsonb,
                    ${input.rate_limit ?? null}, ${jsonOrNull(auth?.column)}::jsonb,
                    ${jsonOrNull(certificate?.column)}::jsonb, ${certificate?.expiresAt ?? null})
            RETURNING ${sql.literal(columns)}
          `)
          yield* queue.setGroup("webhook", orgId, id, hostGroup(orgId, checked.url))
          if (input.ordering === "strict") yield* queue.setStrict("webhook", orgId, id, true)
          if (input.rate_limit !== undefined && input.rate_limit !== null) {
            yield* queue.setRateLimit("webhook", orgId, id, input.rate_limit)
          }
          if (headers !== undefined) yield* writeHeaders(secrets, orgId, id, headers)
          yield* writeSecrets(secrets, authOwner(orgId, id), auth)
          yield* writeSecrets(secrets, certificateOwner(orgId, id), certificate)
          yield* secrets.put(endpointOwner(orgId, id), "signing", Redacted.make(secret))
          yield* secrets.put(endpointUrlOwner(orgId, id), URL_SECRET, Redacted.make(checked.url))
          noticed = yield* noticeIfDue(id, certificate)
          return row
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        yield* woken(noticed)
        return { endpoint: toEndpoint(row), secret }
      })

      const list = Effect.fn("NotificationEndpoints.list")(function*(orgId: string) {
        // With their health, in the order they were made.
        const rows = yield* EndpointRows.all(sql`
          SELECT ${sql.literal(healthColumns)} FROM notification_endpoints e LEFT JOIN delivery_targets t ON t.id = e.id
          WHERE e.org_id = ${orgId} ORDER BY e.seq
        `)
        return rows.map(toEndpoint)
      })

      const find = Effect.fn("NotificationEndpoints.find")(function*(orgId: string, id: string) {
        const row = yield* EndpointRows.one(withHealth(
          sql,
          sql`SELECT ${sql.literal(columns)} FROM notification_endpoints WHERE id = ${id} AND org_id = ${orgId}`
        ))
        if (row === undefined) return yield* new NotFound({ detail: "No such notification endpoint." })
        return row
      })

      const update = Effect.fn("NotificationEndpoints.update")(
        function*(orgId: string, id: string, change: EndpointChange) {
          const selection = change.events === undefined ? undefined : eventSelection(change.events)
          const headers = yield* checkCustomHeaders(change.headers)
          const before = yield* find(orgId, id)
          yield* refuseForBroker(
            before.url_hint.slice(0, before.url_hint.indexOf(":")),
            change.auth,
            change.tls_client_certificate
          )
          yield* refuseAuthorizationHeader(
            change.auth === undefined ? before.auth !== null : change.auth !== null,
            headers === undefined ? before.header_names : headers.map(([name]) => name)
          )
          const auth = yield* prepareAuth(change.auth, (url) => outbound.check(url, orgId))
          const certificate = yield* prepareCertificate(change.tls_client_certificate)
          let noticed = 0
          // Reactivating starts a new streak: a failing notice is due again when it fails again.
          const row = yield* sql.withTransaction(Effect.gen(function*() {
            yield* failingStreak.end(sql, id, activeEndpoint(sql, orgId, false))
            const row = yield* EndpointRows.one(withHealth(
              sql,
              sql`
            UPDATE notification_endpoints
            SET events = ${selection === undefined ? sql`events` : sql`${sql.json(selection)}`},
                action_classes = ${
                change.action_classes === undefined
                  ? sql`action_classes`
                  : sql`${filterColumn(change.action_classes)}::jsonb`
              },
                ordering = ${change.ordering ?? sql`ordering`},
                header_names = ${headers === undefined ? sql`header_names` : sql`${headerNames(headers)}::jsonb`},
                rate_limit = ${change.rate_limit === undefined ? sql`rate_limit` : sql`${change.rate_limit}::int`},
                auth = ${auth === undefined ? sql`auth` : sql`${jsonOrNull(auth?.column)}::jsonb`},
                client_certificate = ${
                certificate === undefined ? sql`client_certificate` : sql`${jsonOrNull(certificate?.column)}::jsonb`
              },
                certificate_expires_at = ${
                certificate === undefined ? sql`certificate_expires_at` : sql`${certificate?.expiresAt ?? null}`
              },
                certificate_notice_at = ${certificate === undefined ? sql`certificate_notice_at` : sql`NULL`},
                active = true, deactivated_at = NULL, deactivated_reason = NULL
            WHERE id = ${id} AND org_id = ${orgId}
            RETURNING ${sql.literal(columns)}
          `
            ))
            // The queue's side of the ordering, in the same transaction.
            if (row !== undefined && change.ordering !== undefined) {
              yield* queue.setStrict("webhook", orgId, id, change.ordering === "strict")
            }
            if (row !== undefined && change.rate_limit !== undefined) {
              yield* queue.setRateLimit("webhook", orgId, id, change.rate_limit)
            }
            if (row !== undefined && headers !== undefined) yield* writeHeaders(secrets, orgId, id, headers)
            if (row !== undefined) yield* writeSecrets(secrets, authOwner(orgId, id), auth)
            if (row !== undefined) yield* writeSecrets(secrets, certificateOwner(orgId, id), certificate)
            if (row !== undefined) noticed = yield* noticeIfDue(id, certificate)
            return row
          })).pipe(Effect.catchTag("SqlError", Effect.die))
          yield* forget(orgId, id)
          yield* woken(noticed)
          if (row === undefined) return yield* new NotFound({ detail: "No such notification endpoint." })
          return toEndpoint(row)
        }
      )

      const remove = Effect.fn("NotificationEndpoints.remove")(function*(orgId: string, id: string) {
        const row = yield* sql.withTransaction(Effect.gen(function*() {
          const row = yield* EndpointRows.one(sql`
            DELETE FROM notification_endpoints WHERE id = ${id} AND org_id = ${orgId}
            RETURNING ${sql.literal(columns)}
          `)
          if (row !== undefined) {
            yield* secrets.removeOwner(endpointOwner(orgId, id))
            yield* secrets.removeOwner(endpointUrlOwner(orgId, id))
            yield* secrets.removeOwner(endpointHeaderOwner(orgId, id))
            yield* secrets.removeOwner(authOwner(orgId, id))
            yield* secrets.removeOwner(certificateOwner(orgId, id))
            yield* queue.removeTarget("webhook", id, "endpoint deleted")
          }
          return row
        })).pipe(Effect.orDie)
        yield* forget(orgId, id)
        if (row === undefined) return yield* new NotFound({ detail: "No such notification endpoint." })
        return row
      })

      const rotateSecret = Effect.fn("NotificationEndpoints.rotateSecret")(function*(
        orgId: string,
        id: string,
        overlapSeconds: number | undefined,
        expirePrevious: "latest" | "all" | undefined
      ) {
        const row = yield* find(orgId, id)
        const { secret, overlapEnd } = yield* rotateSigningSecret(
          sql,
          secrets,
          config.webhookMaxSigningSecrets,
          { orgId, id, overlapSeconds, expirePrevious }
        )
        yield* forget(orgId, id)
        return { endpoint: toEndpoint(row), secret, previous_secret_expires_at: iso(overlapEnd) }
      })

      return NotificationEndpoints.of({
        create,
        list,
        find,
        update,
        remove,
        rotateSecret
      })
    })
  )
}
