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
 * The failing streak is kept with the rest of the endpoint's health, in its
 * `delivery_targets` row; `active` in its `notification_endpoints` row.
 */
import type { PgClient } from "@effect/sql-pg"
import { Duration, Effect } from "effect"
import { failingStreak } from "../../deliveries/Targets.ts"
import { endpointEventInsert } from "../../outbox/Outbox.ts"

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
  // With `failingFor`: only when the endpoint has been failing that long.
  const failingLongEnough = options?.failingFor === undefined
    ? sql``
    : sql`AND id IN (SELECT id FROM delivery_targets
             WHERE id = ${endpointId} AND failing_since <= now() - make_interval(secs => ${Duration.toMillis(options.failingFor) / 1000}))`
  return sql`
    WITH changed AS (
      UPDATE notification_endpoints
      SET active = false, deactivated_at = now(), deactivated_reason = ${reason}
      WHERE id = ${endpointId} AND org_id = ${orgId} AND active ${failingLongEnough}
      RETURNING id, org_id, url_hint, deactivated_at
    )
    ${endpointEventInsert(sql, { type: "endpoint.disabled", stamp: "deactivated_at", active: false, reason })}
  `.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie)
}

/**
 * Starts the endpoint's failing streak and writes `endpoint.failing`, when
 * it is active and not failing already. Answers whether it did.
 */
export const startFailing = (sql: PgClient.PgClient, orgId: string, endpointId: string, reason: string) => {
  return sql`
    WITH started AS (${failingStreak.start(sql, endpointId, activeEndpoint(sql, orgId, true))}),
    changed AS (SELECT e.id, e.org_id, e.url_hint, s.failing_since FROM started s JOIN notification_endpoints e ON e.id = s.id)
    ${endpointEventInsert(sql, { type: "endpoint.failing", stamp: "failing_since", active: true, reason })}
  `.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie)
}

/** Ends the endpoint's failing streak (it delivered again). */
export const stopFailing = (sql: PgClient.PgClient, endpointId: string) =>
  failingStreak.end(sql, endpointId).pipe(Effect.asVoid, Effect.orDie)

/** Over a delivery target `t`: it is the organization's endpoint, and is (or is not) active. */
export const activeEndpoint = (sql: PgClient.PgClient, orgId: string, active: boolean) =>
  sql`EXISTS (SELECT 1 FROM notification_endpoints e WHERE e.id = t.id AND e.org_id = ${orgId} AND e.active = ${active})`
