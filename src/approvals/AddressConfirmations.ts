/**
 * Confirmation mails of reviewer addresses, the organization's
 * (`notifications/ReviewerAddress.ts`) and group members' own
 * (`MemberAddresses.ts`): the delivery that asks `ReviewerEmail` to send
 * one, the organization's hourly bound on them, and the statements that
 * set and confirm the addresses (approvals writes `notification_settings`
 * and `reviewer_member_addresses`; the mail and its link are notifications').
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

const WindowRows = rowsOf(
  "notification_settings",
  Schema.Struct({ claimed: Schema.Boolean, retry_after: Schema.Number })
)

/**
 * Takes one confirmation mail of the organization's hourly window
 * (`SVC_REVIEWER_CONFIRMATIONS_PER_HOUR`, counted on its settings row, made
 * here if it has none), or fails with `RateLimited` saying when the next one
 * is possible.
 */
export const claimConfirmationWindow = (sql: SqlClient.SqlClient, orgId: string, limit: number) =>
  Effect.gen(function*() {
    yield* sql`INSERT INTO notification_settings (org_id, updated_at) VALUES (${orgId}, now()) ON CONFLICT (org_id) DO NOTHING`
      .pipe(
        Effect.orDie
      )
    const fresh =
      sql`(confirm_window_at IS NULL OR confirm_window_at <= now() - make_interval(secs => ${WINDOW_SECONDS}))`
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
) =>
  queue.enqueue({
    orgId,
    kind: "email",
    targetId: orgId,
    label: CONFIRM_LABEL,
    meta: { [CONFIRM_META_KEY]: addressId },
    capacity
  })

/** Sets (null: clears) the organization's reviewer address as setting `addressId`, pending its confirmation. */
export const setOrgAddress = (
  sql: SqlClient.SqlClient,
  orgId: string,
  email: string | null,
  addressId: string | null
) =>
  sql`
    INSERT INTO notification_settings (org_id, reviewer_email, reviewer_address_id, reviewer_confirmed_at, updated_at)
    VALUES (${orgId}, ${email}, ${addressId}, NULL, now())
    ON CONFLICT (org_id) DO UPDATE SET reviewer_email = EXCLUDED.reviewer_email,
      reviewer_address_id = EXCLUDED.reviewer_address_id, reviewer_confirmed_at = NULL, updated_at = now()
  `

/** Sets (null: clears) the organization's reviewer address confirmed (the operator's); a new setting is `addressId`. Answers the organization's row, none when it does not exist. */
export const setConfirmedOrgAddress = (
  sql: SqlClient.SqlClient,
  orgId: string,
  email: string | null,
  addressId: string | null
) =>
  sql`
    INSERT INTO notification_settings (org_id, reviewer_email, reviewer_address_id, reviewer_confirmed_at, updated_at)
    SELECT id, ${email}, ${addressId}, ${email === null ? null : sql`now()`}, now() FROM orgs WHERE id = ${orgId}
    ON CONFLICT (org_id) DO UPDATE SET
      reviewer_email = EXCLUDED.reviewer_email,
      reviewer_address_id = CASE WHEN notification_settings.reviewer_email IS NOT DISTINCT FROM EXCLUDED.reviewer_email
        THEN notification_settings.reviewer_address_id ELSE EXCLUDED.reviewer_address_id END,
      reviewer_confirmed_at = CASE WHEN EXCLUDED.reviewer_email IS NULL THEN NULL
        ELSE coalesce(notification_settings.reviewer_confirmed_at, EXCLUDED.reviewer_confirmed_at) END,
      updated_at = now()
    RETURNING org_id
  `

/**
 * SQL: the CTEs `confirmed` and `member_confirmed` (after a comma) that
 * confirm the address setting a used link names (the CTE `used`: `org_id`,
 * `reviewer_address_id`), the organization's or an accepted member's; each
 * answers `reviewer_email`, `reviewer_confirmed_at`.
 */
export const addressConfirmed = (sql: SqlClient.SqlClient) =>
  sql`,
          confirmed AS (
            UPDATE notification_settings ns
            SET reviewer_confirmed_at = coalesce(ns.reviewer_confirmed_at, now()), updated_at = now()
            FROM used WHERE ns.org_id = used.org_id AND ns.reviewer_address_id = used.reviewer_address_id
              AND ns.reviewer_email IS NOT NULL
            RETURNING ns.reviewer_email, ns.reviewer_confirmed_at
          ),
          member_confirmed AS (
            UPDATE reviewer_member_addresses a
            SET confirmed_at = coalesce(a.confirmed_at, now()), updated_at = now()
            FROM used WHERE a.org_id = used.org_id AND a.address_id = used.reviewer_address_id AND a.accepted_at IS NOT NULL
            RETURNING a.email AS reviewer_email, a.confirmed_at AS reviewer_confirmed_at
          )`
