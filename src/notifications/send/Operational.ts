/**
 * Operational events: `endpoint.disabled` (svc stopped sending to an
 * endpoint: it answered 410 Gone, or it kept failing for
 * `SVC_WEBHOOK_DISABLE_AFTER` without one successful delivery) and
 * `endpoint.failing` (it entered a cooldown after having been healthy;
 * once per failing streak). Written to
 * the outbox (`events`) in the statement that changes the endpoint, so an
 * event exists exactly when the change happened, whichever process made it;
 * `about_endpoint` keeps it from being delivered to the endpoint it is
 * about. Fanned out like every event to the organization's other endpoints
 * that subscribed to these types (never by default).
 *
 * Body: `{id, type, org_id, occurred_at, endpoint: {id, url_hint, reason,
 * active, ...}}` (`deactivated_at` for disabled, `failing_since` for
 * failing): `EndpointEvent` and its per-type schemas in src/api/Events.ts.
 */
import type { PgClient } from "@effect/sql-pg"
import { Duration, Effect } from "effect"
import type { EndpointEvent, EndpointSnapshot } from "../../api/Events.ts"
import { newId } from "../../platform/Ids.ts"

/** RFC 3339 UTC with milliseconds, as every other event's `occurred_at`. */
const ISO = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`

/**
 * The outbox row of an operational event about the endpoint `changed`
 * (a CTE that answers `id, org_id, url_hint` and the instant the change
 * stamped, `stamp`): the `INSERT ... SELECT` both events share. `type` and
 * `stamp` come from the closed unions below, never from a caller's text.
 */
const insertEvent = (
  sql: PgClient.PgClient,
  eventId: string,
  event: {
    readonly type: EndpointEvent["type"]
    readonly stamp: Extract<keyof EndpointSnapshot, "deactivated_at" | "failing_since">
    readonly active: boolean
    readonly reason: string
  }
) => {
  const type = sql.literal(`'${event.type}'`)
  const label = sql.literal(`'${event.type} '`)
  const stampKey = sql.literal(`'${event.stamp}'`)
  const stamp = sql.literal(event.stamp)
  return sql`
    INSERT INTO events (id, org_id, type, occurred_at, body, label, about_endpoint)
    SELECT ${eventId}, c.org_id, ${type}, now(),
           json_build_object(
             'id', ${eventId}::uuid, 'type', ${type}, 'org_id', c.org_id,
             'occurred_at', to_char(now() AT TIME ZONE 'UTC', ${sql.literal(ISO)}),
             'endpoint', json_build_object(
               'id', c.id, 'url_hint', c.url_hint, 'reason', ${event.reason}::text, 'active', ${sql.literal(String(event.active))},
               ${stampKey}, to_char(c.${stamp} AT TIME ZONE 'UTC', ${sql.literal(ISO)})
             )
           )::text,
           ${label} || c.id, c.id
    FROM changed c
    RETURNING id
  `
}

/**
 * Marks the endpoint inactive with `reason` and writes `endpoint.disabled`,
 * when it was active (a second 410 changes nothing). Answers whether it did.
 */
export const disableEndpoint = (
  sql: PgClient.PgClient,
  orgId: string,
  endpointId: string,
  reason: string,
  options?: { readonly failingFor?: Duration.Duration | undefined }
) => {
  const eventId = newId()
  // With `failingFor`: only when the endpoint has been failing that long.
  const failingLongEnough = options?.failingFor === undefined
    ? sql``
    : sql`AND failing_since <= now() - make_interval(secs => ${Duration.toMillis(options.failingFor) / 1000})`
  return sql`
    WITH changed AS (
      UPDATE notification_endpoints
      SET active = false, deactivated_at = now(), deactivated_reason = ${reason}
      WHERE id = ${endpointId} AND org_id = ${orgId} AND active ${failingLongEnough}
      RETURNING id, org_id, url_hint, deactivated_at
    )
    ${insertEvent(sql, eventId, { type: "endpoint.disabled", stamp: "deactivated_at", active: false, reason })}
  `.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie)
}

/**
 * Starts the endpoint's failing streak and writes `endpoint.failing`, when
 * it is active and not failing already. Answers whether it did.
 */
export const startFailing = (sql: PgClient.PgClient, orgId: string, endpointId: string, reason: string) => {
  const eventId = newId()
  return sql`
    WITH changed AS (
      UPDATE notification_endpoints SET failing_since = now()
      WHERE id = ${endpointId} AND org_id = ${orgId} AND active AND failing_since IS NULL
      RETURNING id, org_id, url_hint, failing_since
    )
    ${insertEvent(sql, eventId, { type: "endpoint.failing", stamp: "failing_since", active: true, reason })}
  `.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie)
}

/** Ends the endpoint's failing streak (it delivered again). */
export const stopFailing = (sql: PgClient.PgClient, orgId: string, endpointId: string) =>
  sql`
    UPDATE notification_endpoints SET failing_since = NULL
    WHERE id = ${endpointId} AND org_id = ${orgId} AND failing_since IS NOT NULL
  `.pipe(Effect.asVoid, Effect.orDie)
