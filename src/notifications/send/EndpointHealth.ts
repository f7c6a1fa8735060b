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
 * lease for it. The events are written by `Operational.ts`.
 */
import type { PgClient } from "@effect/sql-pg"
import { Duration, Effect } from "effect"
import type { DeliveryQueue } from "../../deliveries/DeliveryQueue.ts"
import type { SignalledTarget } from "../../deliveries/worker/DeliveryWorker.ts"
import { Topics, type Wakeups } from "../../database/Wakeups.ts"
import { disableEndpoint, startFailing, stopFailing } from "./Operational.ts"
import { GONE } from "./Verdict.ts"

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
  /** Deactivated with `reason` (when it has been failing `failingFor`, if given), its undelivered deliveries failed with it. */
  const deactivate = (orgId: string, id: string, reason: string, failingFor?: Duration.Duration) =>
    sql.withTransaction(Effect.gen(function*() {
      const written = yield* disableEndpoint(sql, orgId, id, reason, { failingFor })
      // A second 410 still fails what was enqueued since.
      if (written || failingFor === undefined) yield* queue.failUndelivered("webhook", id, `endpoint deactivated: ${reason}`)
      return written
    })).pipe(
      Effect.orDie,
      Effect.tap((written) => written ? Effect.andThen(forget(orgId, id), wakeups.signal(Topics.events)) : Effect.void)
    )

  const apply = ({ claimed: { orgId, targetId }, error, failures, signal }: SignalledTarget): Effect.Effect<void> => {
    switch (signal) {
      case "recovered":
        return stopFailing(sql, targetId)
      case "gone":
        return Effect.asVoid(deactivate(orgId, targetId, GONE))
      case "failing": {
        if (failures < failingAfter) return Effect.void
        const reason = `${failures} consecutive failed attempts; last: ${error}`
        return Effect.flatMap(startFailing(sql, orgId, targetId, reason), (started) =>
          started
            ? wakeups.signal(Topics.events)
            : Effect.asVoid(deactivate(
              orgId,
              targetId,
              `no successful delivery for ${Duration.format(disableAfter)} (SVC_WEBHOOK_DISABLE_AFTER); last: ${reason}`,
              disableAfter
            )))
      }
    }
  }

  return (signals: ReadonlyArray<SignalledTarget>) => Effect.forEach(signals, apply, { discard: true })
}
