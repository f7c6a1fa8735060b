/**
 * A notification endpoint as stored and as answered: its row's columns,
 * read with its health where a query joins its delivery target, the
 * answer the API gives (`toEndpoint`), and how a create or PATCH's values
 * are stored (event selection, filter, header names).
 */
import type { PgClient } from "@effect/sql-pg"
import { Schema } from "effect"
import type { Statement } from "effect/sql"
import { ClientCertificateView, EndpointAuthView } from "../api/EndpointAuth.ts"
import { DefaultEventTypes, EndpointOrdering, type EventType, type NotificationEndpoint } from "../api/Notifications.ts"
import { JsonColumn, rowsOf, Timestamp, TimestampOrNull } from "../platform/Rows.ts"
import { type ClearUrls, SEALED_URL_COLUMN } from "../secrets/ReceiverUrls.ts"

/** The selection to store: the six approval events when none is given; duplicates collapse (the schema has refused any other type). */
export const eventSelection = (events: ReadonlyArray<string> | undefined): ReadonlyArray<EventType> =>
  events === undefined ? DefaultEventTypes : [...new Set(events)] as ReadonlyArray<EventType>

export const jsonOrNull = (value: object | undefined) => value === undefined ? null : JSON.stringify(value)

export const headerNames = (headers: ReadonlyArray<readonly [string, string]> | undefined) =>
  JSON.stringify((headers ?? []).map(([name]) => name))

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
export const EndpointRows = rowsOf("notification_endpoints", EndpointColumns)

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

export const columns =
  "id, org_id, url, url_hint, events, ordering, active, deactivated_at, deactivated_reason, created_at, created_by, action_classes, header_names, rate_limit, auth, client_certificate"

/** An `action_classes` filter as stored: null (all), or its entries without duplicates. */
export const filterColumn = (filter: ReadonlyArray<string> | null | undefined) =>
  filter === undefined || filter === null ? null : JSON.stringify([...new Set(filter)])

/**
 * The columns of endpoints `e` with their health, kept in their delivery
 * targets `t`: the failing streak, and the end of a cooldown in progress
 * (in the database's time).
 */
export const healthColumns = `${columns.split(", ").map((column) => `e.${column}`).join(", ")},
  t.failing_since, CASE WHEN t.cooldown_until > now() THEN t.cooldown_until END AS cooldown_until`

/** The endpoint rows `rows` answers, with their health. */
export const withHealth = (sql: PgClient.PgClient, rows: Statement.Fragment) =>
  sql`WITH e AS (${rows}) SELECT ${sql.literal(healthColumns)} FROM e LEFT JOIN delivery_targets t ON t.id = e.id`

/** The endpoints' URLs still in clear, and the claim that seals one, for their move into the secret store at start (`secrets/ReceiverUrls.ts`). */
export const endpointClearUrls: ClearUrls = {
  kind: "notification_endpoint_url",
  table: "notification_endpoints",
  clear: (sql) => sql`SELECT id, org_id, url FROM notification_endpoints WHERE url <> ${SEALED_URL_COLUMN} LIMIT 100`,
  claim: (sql, row, hint) =>
    sql`UPDATE notification_endpoints SET url = ${SEALED_URL_COLUMN}, url_hint = ${hint} WHERE id = ${row.id} AND url = ${row.url} RETURNING id`
}
