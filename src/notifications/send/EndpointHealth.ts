/**
 * An endpoint's health, applied in one place: after each settle batch the
 * webhook worker hands over what the recorded attempts said of their
 * endpoints (`TargetSignal`, decided by `Verdict.ts`) with the consecutive
 * failures the settle wrote (`delivery_targets`, which also holds the
 * cooldown). Here:
 *
 * - `recovered` (a delivery after failures): the failing streak ends.
 * - `failing`, once the recorded failures reach `SVC_WEBHOOK_COOLDOWN_AFTER`:
 *   the streak starts (`endpoint.failing`, once per streak); an endpoint
 *   failing for `SVC_WEBHOOK_DISABLE_AFTER` is deactivated instead
 *   (`endpoint.disabled`).
 * - `gone` (410): deactivated (`endpoint.disabled`).
 *
 * A deactivation fails the endpoint's undelivered deliveries in the same
 * transaction. The attempt that decided it is recorded already (failed, or
 * retrying and failed with the rest), so no delivery is held back under its
 * lease for it.
 *
 * The operational events, `endpoint.disabled` (svc stopped sending to an
 * endpoint: it answered 410 Gone, or it kept failing for
 * `SVC_WEBHOOK_DISABLE_AFTER` without one successful delivery) and
 * `endpoint.failing` (it entered a cooldown after having been healthy;
 * once per failing streak), are written to the outbox (`events`) in the
 * statement that changes the endpoint, so an event exists exactly when the
 * change happened, whichever process made it; `about_endpoint` keeps it
 * from being delivered to the endpoint it is about. Fanned out like every
 * event to the organization's other endpoints that subscribed to these
 * types (never by default).
 *
 * Body: `{id, type, org_id, occurred_at, endpoint: {id, url_hint, reason,
 * active, ...}}` (`deactivated_at` for disabled, `failing_since` for
 * failing): `EndpointEvent` and its per-type schemas in src/api/Events.ts.
 * The failing streak is kept with the rest of the endpoint's health, in its
 * `delivery_targets` row; `active` in its `notification_endpoints` row.
 */
import type { PgClient } from "@effect/sql-pg"
import { Duration, Effect } from "effect"
import { Topics, type Wakeups } from "../../database/Wakeups.ts"
import type { DeliveryQueue } from "../../deliveries/DeliveryQueue.ts"
import { failingStreak } from "../../deliveries/Targets.ts"
import type { SignalledTarget } from "../../deliveries/worker/Outcomes.ts"
import { endpointEventInsert } from "../../outbox/Outbox.ts"
import { GONE } from "./Verdict.ts"

/** Over a delivery target `t`: it is the organization's endpoint, and is (or is not) active. */
export const activeEndpoint = (sql: PgClient.PgClient, orgId: string, active: boolean) =>
  sql`EXISTS (SELECT 1 FROM notification_endpoints e WHERE e.id = t.id AND e.org_id = ${orgId} AND e.active = ${active})`

export interface HealthParts {
  readonly sql: PgClient.PgClient
  readonly queue: DeliveryQueue["Service"]
  readonly wakeups: Wakeups["Service"]
  /** Drops what this process holds of the endpoint for its sends. */
  readonly forget: (orgId: string, id: string) => Effect.Effect<void>
  /** `SVC_WEBHOOK_COOLDOWN_AFTER` */
  readonly failingAfter: number
  /** `SVC_WEBHOOK_DISABLE_AFTER` */
  readonly disableAfter: Duration.Duration
}

/** The worker's `health` for webhook endpoints. */
export const makeEndpointHealth = ({ disableAfter, failingAfter, forget, queue, sql, wakeups }: HealthParts) => {
  /**
   * Marks the endpoint inactive with `reason` and writes `endpoint.disabled`,
   * when it was active (a second 410 changes nothing) and, with
   * `failingFor`, has been failing that long; its undelivered deliveries
   * fail with it. Answers whether it was deactivated.
   */
  const deactivate = (orgId: string, id: string, reason: string, failingFor?: Duration.Duration) => {
    const failingLongEnough = failingFor === undefined
      ? sql``
      : sql`AND id IN (SELECT id FROM delivery_targets
               WHERE id = ${id} AND failing_since <= now() - make_interval(secs => ${
        Duration.toMillis(failingFor) / 1000
      }))`
    return sql.withTransaction(Effect.gen(function*() {
      const written = (yield* sql`
        WITH changed AS (
          UPDATE notification_endpoints
          SET active = false, deactivated_at = now(), deactivated_reason = ${reason}
          WHERE id = ${id} AND org_id = ${orgId} AND active ${failingLongEnough}
          RETURNING id, org_id, url_hint, deactivated_at
        )
        ${endpointEventInsert(sql, { type: "endpoint.disabled", stamp: "deactivated_at", active: false, reason })}
      `).length > 0
      // A second 410 still fails what was enqueued since.
      if (written || failingFor === undefined) {
        yield* queue.failUndelivered("webhook", id, `endpoint deactivated: ${reason}`)
      }
      return written
    })).pipe(
      Effect.orDie,
      Effect.tap((written) => written ? Effect.andThen(forget(orgId, id), wakeups.signal(Topics.events)) : Effect.void)
    )
  }

  /** Starts the failing streak and writes `endpoint.failing`, when it is active and not failing already. */
  const startFailing = (orgId: string, id: string, reason: string) =>
    sql`
      WITH started AS (${failingStreak.start(sql, id, activeEndpoint(sql, orgId, true))}),
      changed AS (SELECT e.id, e.org_id, e.url_hint, s.failing_since FROM started s JOIN notification_endpoints e ON e.id = s.id)
      ${endpointEventInsert(sql, { type: "endpoint.failing", stamp: "failing_since", active: true, reason })}
    `.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie)

  const apply = ({ claimed: { orgId, targetId }, error, failures, signal }: SignalledTarget): Effect.Effect<void> => {
    switch (signal) {
      case "recovered":
        return failingStreak.end(sql, targetId).pipe(Effect.asVoid, Effect.orDie)
      case "gone":
        return Effect.asVoid(deactivate(orgId, targetId, GONE))
      case "failing": {
        if (failures < failingAfter) return Effect.void
        const reason = `${failures} consecutive failed attempts; last: ${error}`
        return Effect.flatMap(startFailing(orgId, targetId, reason), (started) =>
          started
            ? wakeups.signal(Topics.events)
            : Effect.asVoid(deactivate(
              orgId,
              targetId,
              `no successful delivery for ${
                Duration.format(disableAfter)
              } (SVC_WEBHOOK_DISABLE_AFTER); last: ${reason}`,
              disableAfter
            )))
      }
    }
  }

  return (signals: ReadonlyArray<SignalledTarget>) => Effect.forEach(signals, apply, { discard: true })
}
