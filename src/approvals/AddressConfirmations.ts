/**
 * Confirmation mails of reviewer addresses, the organization's
 * (`notifications/ReviewerAddress.ts`) and group members' own
 * (`MemberAddresses.ts`): the delivery that asks `ReviewerEmail` to send
 * one, and the organization's hourly bound on them.
 */
import { Effect, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { RateLimited } from "../api/Errors.ts"
import type { DeliveryQueue } from "../deliveries/DeliveryQueue.ts"
import { rowsOf } from "../platform/Rows.ts"

/** Meta key of a confirmation mail's delivery: the address setting it confirms. */
export const CONFIRM_META_KEY = "confirms_address"

/** Label of a confirmation mail's delivery. */
const CONFIRM_LABEL = "reviewer.confirmation"

const WINDOW_SECONDS = 3600

const WindowRows = rowsOf("notification_settings", Schema.Struct({ claimed: Schema.Boolean, retry_after: Schema.Number }))

/**
 * Takes one confirmation mail of the organization's hourly window
 * (`SVC_REVIEWER_CONFIRMATIONS_PER_HOUR`, counted on its settings row, made
 * here if it has none), or fails with `RateLimited` saying when the next one
 * is possible.
 */
export const claimConfirmationWindow = (sql: SqlClient.SqlClient, orgId: string, limit: number) =>
  Effect.gen(function*() {
    yield* sql`INSERT INTO notification_settings (org_id, updated_at) VALUES (${orgId}, now()) ON CONFLICT (org_id) DO NOTHING`.pipe(
      Effect.orDie
    )
    const fresh = sql`(confirm_window_at IS NULL OR confirm_window_at <= now() - make_interval(secs => ${WINDOW_SECONDS}))`
    const row = yield* WindowRows.one(sql`
      WITH claimed AS (
        UPDATE notification_settings
        SET confirm_window_at = CASE WHEN ${fresh} THEN now() ELSE confirm_window_at END,
            confirm_count = CASE WHEN ${fresh} THEN 1 ELSE confirm_count + 1 END
        WHERE org_id = ${orgId} AND (${fresh} OR confirm_count < ${limit})
        RETURNING org_id
      )
      SELECT EXISTS (SELECT 1 FROM claimed) AS claimed,
             coalesce((SELECT ceil(extract(epoch FROM confirm_window_at + make_interval(secs => ${WINDOW_SECONDS}) - now()))::int
                       FROM notification_settings WHERE org_id = ${orgId}), 1) AS retry_after
    `).pipe(Effect.orDie)
    if (row?.claimed === true) return
    const retryAfter = Math.max(1, row?.retry_after ?? 1)
    return yield* new RateLimited({
      limit: "SVC_REVIEWER_CONFIRMATIONS_PER_HOUR",
      limit_value: limit,
      retry_after_seconds: retryAfter,
      detail:
        `This organization caused ${limit} confirmation mails in the last hour, the most allowed (SVC_REVIEWER_CONFIRMATIONS_PER_HOUR); the address was not changed. Retry in ${retryAfter} s.`
    })
  })

/** Queues the confirmation mail of the address setting `addressId`, the organization's or a member's (the caller wakes the email worker after its commit). */
export const queueConfirmation = (
  queue: DeliveryQueue["Service"],
  orgId: string,
  addressId: string,
  capacity: number
) => queue.enqueue({ orgId, kind: "email", targetId: orgId, label: CONFIRM_LABEL, meta: { [CONFIRM_META_KEY]: addressId }, capacity })

