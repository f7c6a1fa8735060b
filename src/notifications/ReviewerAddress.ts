/**
 * The organization's reviewer address, and its confirmation: an address
 * receives approval mail (whose links decide approvals) only once the
 * mailbox has shown it reads svc's mail.
 *
 * - Setting a new address (`PUT /v1/notification-settings`) gives it a new
 *   `reviewer_address_id` and makes it `pending`, and queues one
 *   confirmation mail (an `email` delivery, sent by `ReviewerEmail` through
 *   the same SMTP path as approval mail). Setting the address it already
 *   has changes nothing, except that a pending one gets a new mail. How many
 *   confirmation mails an organization may cause is bounded per hour
 *   (`SVC_REVIEWER_CONFIRMATIONS_PER_HOUR`), counted on its settings row in
 *   the statement that claims one, so the bound holds across processes.
 * - The mail's link (`/console/confirm-address#<token>`) is made when the
 *   mail is sent: 256 random bits, only the SHA-256 stored, with the
 *   address setting it confirms; it works once, within
 *   `SVC_REVIEWER_CONFIRMATION_TTL`, and only while that setting is the
 *   organization's.
 * - Every decision link names the setting it was mailed under; it works
 *   while that setting is the organization's and confirmed
 *   (`MailLinks.ts` checks it when the link is used).
 * - An address the operator sets (`svc notifications reviewer-email`) is
 *   confirmed at once: the operator answers for it.
 * - A group member's own address (`approvals/MemberAddresses.ts`) is confirmed the
 *   same way: the same mail, link, TTL and hourly bound, its setting's id
 *   standing where the organization's would.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import type { Statement } from "effect/sql"
import {
  ConfirmationLinkExpired,
  ConfirmationLinkInvalid,
  ConfirmationLinkUsed,
  ReviewerAddressReplaced
} from "../api/ApprovalLinks.ts"
import { RateLimited } from "../api/Errors.ts"
import type { NotificationSettings } from "../api/Notifications.ts"
import {
  addressConfirmed,
  claimConfirmationWindow,
  queueConfirmation,
  setConfirmedOrgAddress,
  setOrgAddress
} from "../approvals/AddressConfirmations.ts"
import { DeliveryQueue } from "../deliveries/DeliveryQueue.ts"
import { SvcConfig } from "../platform/Config.ts"
import { sha256Hex } from "../platform/Digest.ts"
import { newId } from "../platform/Ids.ts"
import { Instant, InstantOrNull, rowsOf } from "../platform/Rows.ts"
import { iso } from "../platform/Time.ts"
import { CONFIRMATION_PREFIX } from "./send/ConfirmationLinks.ts"

const SettingsRow = Schema.Struct({
  reviewer_email: Schema.NullOr(Schema.String),
  reviewer_address_id: Schema.NullOr(Schema.String),
  reviewer_confirmed_at: InstantOrNull
})
const SettingsRows = rowsOf("notification_settings", SettingsRow)
const ConfirmedRows = rowsOf(
  "reviewer_confirmations",
  Schema.Struct({
    used: Schema.Boolean,
    reviewer_email: Schema.NullOr(Schema.String),
    reviewer_confirmed_at: InstantOrNull
  })
)
const KnownRows = rowsOf("reviewer_confirmations", Schema.Struct({ used_at: InstantOrNull, expires_at: Instant }))

type Settings = typeof NotificationSettings.Type

/**
 * Sets (or, with null, clears) the organization's reviewer address as the
 * operator: confirmed at once. False when the organization does not exist.
 */
export const writeReviewerEmail = Effect.fnUntraced(function*(orgId: string, email: string | null) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* setConfirmedOrgAddress(sql, orgId, email, email === null ? null : newId())
  return rows.length > 0
}, Effect.orDie)

const INVALID =
  "This is not the confirmation link of a reviewer address of this service. Use the whole link of the latest mail."

export class ReviewerAddresses extends Context.Service<ReviewerAddresses, {
  readonly settings: (orgId: string) => Effect.Effect<Settings>
  /** The API's `PUT`: a new address is pending and is sent a confirmation mail. */
  readonly set: (orgId: string, email: string | null) => Effect.Effect<Settings, RateLimited>
  /** Uses a confirmation link once: the address it was mailed to is confirmed. */
  readonly confirm: (token: string) => Effect.Effect<
    { readonly reviewer_email: string; readonly reviewer_email_status: "confirmed"; readonly confirmed_at: string },
    ConfirmationLinkInvalid | ConfirmationLinkUsed | ConfirmationLinkExpired | ReviewerAddressReplaced
  >
}>()("svc/notifications/ReviewerAddresses") {
  static readonly layer = Layer.effect(
    ReviewerAddresses,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const config = yield* SvcConfig
      const queue = yield* DeliveryQueue
      const smtp = Option.isSome(config.smtpUrl)

      const current = (orgId: string, lock: boolean) =>
        SettingsRows.one(sql`
          SELECT reviewer_email, reviewer_address_id, reviewer_confirmed_at FROM notification_settings WHERE org_id = ${orgId}
          ${lock ? sql`FOR UPDATE` : sql``}
        `)

      const toSettings = (row: typeof SettingsRow.Type | undefined): Settings => {
        const email = row?.reviewer_email ?? null
        const confirmed = email !== null && row?.reviewer_confirmed_at !== null
        return {
          reviewer_email: email,
          reviewer_email_status: email === null ? null : confirmed ? "confirmed" : "pending",
          email_notifier: smtp && confirmed
        }
      }

      const settings = Effect.fn("ReviewerAddresses.settings")(function*(orgId: string) {
        return toSettings(yield* current(orgId, false))
      }, Effect.orDie)

      const set = Effect.fn("ReviewerAddresses.set")(function*(orgId: string, email: string | null) {
        const mailed = yield* sql.withTransaction(Effect.gen(function*() {
          const before = yield* current(orgId, true).pipe(Effect.orDie)
          const same = (before?.reviewer_email ?? null) === email
          if (same && (email === null || before?.reviewer_confirmed_at !== null)) return false
          const addressId = email === null ? null : same ? before!.reviewer_address_id ?? newId() : newId()
          yield* setOrgAddress(sql, orgId, email, addressId).pipe(Effect.orDie)
          // Without SMTP no mail can go: the address waits, and setting it
          // again once SMTP is configured sends the mail.
          if (email === null || addressId === null || !smtp) return false
          yield* claimConfirmationWindow(sql, orgId, config.reviewerConfirmationsPerHour)
          yield* queueConfirmation(queue, orgId, addressId, config.webhookQueueCapacity)
          return true
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        if (mailed) yield* queue.wake("email")
        return yield* settings(orgId)
      })

      const confirm = Effect.fn("ReviewerAddresses.confirm")(function*(token: string) {
        if (!token.startsWith(CONFIRMATION_PREFIX) || token.length > 200) {
          return yield* new ConfirmationLinkInvalid({ detail: INVALID })
        }
        const hash = sha256Hex(token)
        // One statement uses the link and confirms its address: of two
        // racing requests, one uses it and the other finds it used.
        const row = yield* ConfirmedRows.one(sql`
          WITH used AS (
            UPDATE reviewer_confirmations SET used_at = now()
            WHERE token_hash = ${hash} AND used_at IS NULL AND expires_at > now()
            RETURNING org_id, reviewer_address_id
          )${addressConfirmed(sql)}
          SELECT EXISTS (SELECT 1 FROM used) AS used, c.reviewer_email, c.reviewer_confirmed_at
          FROM (SELECT 1) one LEFT JOIN (SELECT * FROM confirmed UNION ALL SELECT * FROM member_confirmed) c ON true
        `).pipe(Effect.orDie)
        if (row !== undefined && row.reviewer_email !== null && row.reviewer_confirmed_at !== null) {
          return {
            reviewer_email: row.reviewer_email,
            reviewer_email_status: "confirmed" as const,
            confirmed_at: iso(row.reviewer_confirmed_at)
          }
        }
        if (row?.used === true) {
          return yield* new ReviewerAddressReplaced({
            detail:
              "The address this link was mailed to is no longer the reviewer address it was set as (the organization's, or a group member's); nothing was confirmed."
          })
        }
        const known = yield* KnownRows.one(
          sql`SELECT used_at, expires_at FROM reviewer_confirmations WHERE token_hash = ${hash}`
        ).pipe(
          Effect.orDie
        )
        if (known === undefined) return yield* new ConfirmationLinkInvalid({ detail: INVALID })
        if (known.used_at !== null) {
          return yield* new ConfirmationLinkUsed({
            used_at: iso(known.used_at),
            detail: "This confirmation link was used already; a link works once."
          })
        }
        return yield* new ConfirmationLinkExpired({
          expired_at: iso(known.expires_at),
          detail: "This confirmation link expired before it was used. Set the address again to be sent a new one."
        })
      })

      return ReviewerAddresses.of({ settings, set, confirm })
    })
  )
}

/** Deletes reviewer address confirmation links used or expired before `before` (`retention/Retention.ts`): at most `batch`, skipping rows another statement holds; answers the rows. */
export const pruneConfirmations = (sql: SqlClient.SqlClient, before: Statement.Fragment, batch: number) =>
  sql`
    DELETE FROM reviewer_confirmations WHERE ctid IN (
      SELECT ctid FROM reviewer_confirmations WHERE least(coalesce(used_at, expires_at), expires_at) < ${before} LIMIT ${batch} FOR UPDATE SKIP LOCKED
    )
    RETURNING 1 AS deleted
  `
