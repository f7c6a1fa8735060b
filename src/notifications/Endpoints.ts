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
import type { Statement } from "effect/sql"
import { Context, Effect, Layer, Redacted, Schema } from "effect"
import { parseEndpointUrl } from "../brokers/BrokerUrl.ts"
import { headersRefused, type InvalidHeaders, type InvalidRequest, LimitReached, NotFound } from "../api/Errors.ts"
import { ClientCertificateView, EndpointAuthView } from "../api/EndpointAuth.ts"
import { InvalidUrl } from "../api/Deliveries.ts"
import { EndpointOrdering, type EventType, type InvalidWebhookEvents, type NotificationEndpoint } from "../api/Notifications.ts"
import { DefaultEventTypes } from "../api/Notifications.ts"
import { DeliveryQueue } from "../deliveries/DeliveryQueue.ts"
import { failingStreak } from "../deliveries/Targets.ts"
import { checkHeaders } from "../outbound/HeaderRules.ts"
import { OutboundHttp } from "../outbound/OutboundHttp.ts"
import { SvcConfig } from "../platform/Config.ts"
import { newId } from "../platform/Ids.ts"
import { countForCap } from "../platform/OrgLimits.ts"
import { JsonColumn, rowsOf, Timestamp, TimestampOrNull } from "../platform/Rows.ts"
import { databaseNow, iso } from "../platform/Time.ts"
import { endpointUrlOwner, SEALED_URL_COLUMN, URL_SECRET } from "../secrets/ReceiverUrls.ts"
import { SecretStore } from "../secrets/SecretStore.ts"
import { activeEndpoint } from "./send/EndpointHealth.ts"
import { writeCertificateNotices } from "./auth/CertificateNotices.ts"
import { Topics, Wakeups } from "../database/Wakeups.ts"
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
import { endpointHeaderOwner, endpointOwner, SendTargets } from "./send/SendTargets.ts"
import { newSigningSecret, OWN_HEADERS } from "./send/Signing.ts"

/** The selection to store: the six approval events when none is given; duplicates collapse (the schema has refused any other type). */
const eventSelection = (events: ReadonlyArray<string> | undefined): ReadonlyArray<EventType> =>
  events === undefined ? DefaultEventTypes : [...new Set(events)] as ReadonlyArray<EventType>

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

const jsonOrNull = (value: object | undefined) => value === undefined ? null : JSON.stringify(value)

const headerNames = (headers: ReadonlyArray<readonly [string, string]> | undefined) => JSON.stringify((headers ?? []).map(([name]) => name))

/** A `notification_endpoints` row (with, where a query joins it, its health: `withHealth`). */
const EndpointColumns = Schema.Struct({
  id: Schema.String,
  org_id: Schema.String,
  url: Schema.String,
  url_hint: Schema.String,
  events: JsonColumn(Schema.Array(Schema.String)),
  ordering: EndpointOrdering,
  active: Schema.Boolean,
  deactivated_at: TimestampOrNull,
  deactivated_reason: Schema.NullOr(Schema.String),
  created_at: Timestamp,
  created_by: Schema.String,
  action_classes: JsonColumn(Schema.NullOr(Schema.Array(Schema.String))),
  header_names: JsonColumn(Schema.Array(Schema.String)),
  rate_limit: Schema.NullOr(Schema.Number),
  auth: JsonColumn(EndpointAuthView),
  client_certificate: JsonColumn(ClientCertificateView),
  cooldown_until: Schema.optionalKey(TimestampOrNull),
  failing_since: Schema.optionalKey(TimestampOrNull)
})
export type EndpointRow = typeof EndpointColumns.Type
const EndpointRows = rowsOf("notification_endpoints", EndpointColumns)

export const toEndpoint = (row: EndpointRow): NotificationEndpoint => ({
  id: row.id,
  url_hint: row.url_hint,
  events: [...row.events],
  ordering: row.ordering,
  active: row.active,
  created_at: row.created_at,
  created_by: row.created_by,
  ...(row.deactivated_at === null ? {} : { deactivated_at: row.deactivated_at }),
  ...(row.deactivated_reason === null ? {} : { deactivated_reason: row.deactivated_reason }),
  ...(row.cooldown_until === undefined || row.cooldown_until === null ? {} : { cooldown_until: row.cooldown_until }),
  ...(row.failing_since === undefined || row.failing_since === null ? {} : { failing_since: row.failing_since }),
  action_classes: row.action_classes === null ? null : [...row.action_classes],
  headers: [...row.header_names],
  rate_limit: row.rate_limit,
  auth: row.auth,
  tls_client_certificate: row.client_certificate
})

const DEFAULT_OVERLAP_SECONDS = 24 * 3600

const columns =
  "id, org_id, url, url_hint, events, ordering, active, deactivated_at, deactivated_reason, created_at, created_by, action_classes, header_names, rate_limit, auth, client_certificate"

/** An `action_classes` filter as stored: null (all), or its entries without duplicates. */
const filterColumn = (filter: ReadonlyArray<string> | null | undefined) =>
  filter === undefined || filter === null ? null : JSON.stringify([...new Set(filter)])

/**
 * The columns of endpoints `e` with their health, kept in their delivery
 * targets `t`: the failing streak, and the end of a cooldown in progress
 * (in the database's time).
 */
const healthColumns = `${columns.split(", ").map((column) => `e.${column}`).join(", ")},
  t.failing_since, CASE WHEN t.cooldown_until > now() THEN t.cooldown_until END AS cooldown_until`

/** The endpoint rows `rows` answers, with their health. */
const withHealth = (sql: PgClient.PgClient, rows: Statement.Fragment) =>
  sql`WITH e AS (${rows}) SELECT ${sql.literal(healthColumns)} FROM e LEFT JOIN delivery_targets t ON t.id = e.id`

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
              detail: `The organization already has ${limit} notification endpoints, the most allowed (SVC_MAX_ENDPOINTS_PER_ORG); delete one first.`
            })
          }
          const id = newId()
          const row = yield* EndpointRows.returned(sql`
            INSERT INTO notification_endpoints (id, org_id, url, url_hint, events, created_by, action_classes, ordering,
                                                header_names, rate_limit, auth, client_certificate, certificate_expires_at)
            VALUES (${id}, ${orgId}, ${SEALED_URL_COLUMN}, ${checked.urlHint}, ${sql.json(events)}, ${keyId},
                    ${filterColumn(input.action_classes)}::jsonb, ${input.ordering ?? "concurrent"}, ${headerNames(headers)}::jsonb,
                    ${input.rate_limit ?? null}, ${jsonOrNull(auth?.column)}::jsonb,
                    ${jsonOrNull(certificate?.column)}::jsonb, ${certificate?.expiresAt ?? null})
            RETURNING ${sql.literal(columns)}
          `)
          if (input.ordering === "strict") yield* queue.setStrict("webhook", orgId, id, true)
          if (input.rate_limit !== undefined && input.rate_limit !== null) yield* queue.setRateLimit("webhook", orgId, id, input.rate_limit)
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

      const update = Effect.fn("NotificationEndpoints.update")(function*(orgId: string, id: string, change: EndpointChange) {
        const selection = change.events === undefined ? undefined : eventSelection(change.events)
        const headers = yield* checkCustomHeaders(change.headers)
        const before = yield* find(orgId, id)
        yield* refuseForBroker(before.url_hint.slice(0, before.url_hint.indexOf(":")), change.auth, change.tls_client_certificate)
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
                action_classes = ${change.action_classes === undefined ? sql`action_classes` : sql`${filterColumn(change.action_classes)}::jsonb`},
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
          if (row !== undefined && change.rate_limit !== undefined) yield* queue.setRateLimit("webhook", orgId, id, change.rate_limit)
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
      })

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
        const owner = endpointOwner(orgId, id)
        const secret = newSigningSecret()
        const expire = expirePrevious ?? "latest"
        const maxSecrets = config.webhookMaxSigningSecrets
        // Puts `secret` in use and ends the earlier ones within the overlap,
        // never later than they were to end; `overlapEnd` is the overlap's
        // end, in the database's time: that is what `list` compares with.
        //
        // `latest` ends only the secret signing until now: an older one still
        // in the overlap of an earlier rotation keeps the end that rotation
        // announced (a receiver may still verify with it alone), so a rotation
        // after which more than `maxSecrets` would sign at once is refused;
        // with overlap 0 the one signing until now ends at once, so it never
        // adds one. `all` ends every earlier one within the overlap, and the
        // oldest beyond `maxSecrets` at once: the caller asked for it (with
        // overlap 0, every earlier secret ends now, at the cap too).
        //
        // The endpoint's row is locked first: concurrent rotations of one
        // endpoint (on a PostgreSQL server, from any process) take turns, and
        // each counts the secrets the one before it left.
        const overlapEnd = yield* sql.withTransaction(Effect.gen(function*() {
          const locked = yield* sql`SELECT id FROM notification_endpoints WHERE id = ${id} AND org_id = ${orgId} FOR UPDATE`
          if (locked.length === 0) return yield* new NotFound({ detail: "No such notification endpoint." })
          const now = new Date(yield* databaseNow(sql))
          const overlap = overlapSeconds ?? DEFAULT_OVERLAP_SECONDS
          const until = new Date(now.getTime() + overlap * 1000)
          // Those in use, newest first.
          const current = yield* secrets.list(owner)
          const signingAfter = 1 + current.length - (overlap === 0 && current.length > 0 ? 1 : 0)
          if (expire === "latest" && signingAfter > maxSecrets) {
            const oldest = current.at(-1)!
            return yield* new LimitReached({
              limit: "SVC_WEBHOOK_MAX_SIGNING_SECRETS",
              limit_value: maxSecrets,
              detail: `${current.length} secrets sign this endpoint's deliveries until the oldest ends at ${
                iso(oldest.expires_at ?? now)
              }; rotate after that, with overlap_seconds: 0 (the secret signing until now ends at once), ` +
                `or pass expire_previous: "all" to end the earlier secrets within this overlap.`
            })
          }
          for (const [index, old] of current.entries()) {
            if (expire === "all" && index >= maxSecrets - 1) yield* secrets.expire(owner, old.id, now)
            // Shorten, never lengthen, the life of a secret already expiring.
            else if ((index === 0 || expire === "all") && (old.expires_at === null || new Date(old.expires_at) > until)) {
              yield* secrets.expire(owner, old.id, until)
            }
          }
          yield* secrets.put(owner, "signing", Redacted.make(secret))
          return until
        })).pipe(Effect.catchTag("SqlError", Effect.die))
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
