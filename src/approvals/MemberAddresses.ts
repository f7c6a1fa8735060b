/**
 * Reviewer group members' own addresses (docs/approvals.md, "Reviewer
 * mail to the group"): one per person per organization
 * (`reviewer_member_addresses`, keyed by the person as group members and
 * `decided_by` name them).
 *
 * Only the member makes an address theirs (docs/approvals.md, "Who may act
 * as whom"). An administrator (`org_config.write`, a member's `email` in
 * `PUT /v1/reviewer-groups/:name`) only invites one: it is stored
 * `invited`, mailed nothing, and decides nothing. The member, signed in as
 * themselves or with their own key, sets their address or accepts the
 * invited one (`PUT /v1/reviewer-address`): it is then `pending` and gets
 * one confirmation mail (counted in the organization's hourly bound), exactly
 * as the organization's is (`notifications/ReviewerAddress.ts`,
 * `AddressConfirmations.ts`), and receives approval mail once that link is
 * used. An address stands (gets mail, its links decide) only while both the
 * member's acceptance and the mailbox's confirmation of that setting stand
 * (`memberAddressStands`). A new setting id (a new address, or none) ends
 * every link mailed under the previous one (`MailLinks.ts` checks it);
 * revoking a key deletes its address (migration 0890).
 */
import { Effect, Option, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { deciderOf } from "../api/Deciders.ts"
import type { RateLimited } from "../api/Errors.ts"
import type { GroupMemberInput } from "../api/Reviewers.ts"
import type { DeliveryQueue } from "../deliveries/DeliveryQueue.ts"
import type { SvcConfigShape } from "../platform/Config.ts"
import { newId } from "../platform/Ids.ts"
import { InstantOrNull, rowsOf } from "../platform/Rows.ts"
import { claimConfirmationWindow, queueConfirmation } from "./AddressConfirmations.ts"

/** Meta key of an approval mail's delivery to a member's own address: that address setting's id. */
export const MEMBER_META_KEY = "member_address"

/**
 * SQL, over `reviewer_member_addresses` aliased `alias`: the address stands
 * (accepted by its member and confirmed, and the member is no revoked key:
 * revocation deletes the address, and this holds however a key was revoked).
 */
export const memberAddressStands = (alias: string) =>
  `${alias}.accepted_at IS NOT NULL AND ${alias}.confirmed_at IS NOT NULL AND svc_person(${alias}.org_id, ${alias}.member) IS NOT NULL`

const AddressRows = rowsOf(
  "reviewer_member_addresses",
  Schema.Struct({
    email: Schema.String,
    address_id: Schema.String,
    confirmed_at: InstantOrNull,
    accepted_at: InstantOrNull
  })
)

const lockAddress = (sql: SqlClient.SqlClient, orgId: string, member: string) =>
  AddressRows.one(sql`
    SELECT email, address_id, confirmed_at, accepted_at FROM reviewer_member_addresses
    WHERE org_id = ${orgId} AND member = ${member} FOR UPDATE
  `).pipe(Effect.orDie)

const clearAddress = (sql: SqlClient.SqlClient, orgId: string, member: string) =>
  sql`DELETE FROM reviewer_member_addresses WHERE org_id = ${orgId} AND member = ${member}`.pipe(
    Effect.asVoid,
    Effect.orDie
  )

/** Stores `email` as `member`'s address under a new setting id: accepted now (the member's own act) or only invited. */
const storeAddress = (sql: SqlClient.SqlClient, orgId: string, member: string, email: string, accepted: boolean) =>
  Effect.gen(function*() {
    const addressId = newId()
    yield* sql`
      INSERT INTO reviewer_member_addresses (org_id, member, email, address_id, confirmed_at, accepted_at, updated_at)
      VALUES (${orgId}, ${member}, ${email}, ${addressId}, NULL, ${accepted ? sql`now()` : sql`NULL`}, now())
      ON CONFLICT (org_id, member) DO UPDATE SET email = EXCLUDED.email, address_id = EXCLUDED.address_id,
        confirmed_at = NULL, accepted_at = EXCLUDED.accepted_at, updated_at = now()
    `.pipe(Effect.orDie)
    return addressId
  })

/**
 * Stores the addresses an administrator gives `members` (in the caller's
 * transaction) as invitations: a new or changed one is `invited`, with a new
 * setting id, and mails nothing; the address a member already has changes
 * nothing; `null` clears it.
 */
export const inviteMemberAddresses = (
  sql: SqlClient.SqlClient,
  orgId: string,
  members: ReadonlyArray<GroupMemberInput>
) =>
  Effect.forEach(members, (input) =>
    Effect.gen(function*() {
      if (input.email === undefined) return
      const member = deciderOf(input)
      if (input.email === null) return yield* clearAddress(sql, orgId, member)
      const before = yield* lockAddress(sql, orgId, member)
      if (before?.email !== input.email) yield* storeAddress(sql, orgId, member, input.email, false)
    }), { discard: true })

/**
 * The member's own act (in the caller's transaction): `email` becomes their
 * address, accepted. The invited address (the same one) is accepted as it
 * is, its mailbox confirmation kept; any other is new and pending. A pending
 * address is queued its confirmation mail when SMTP is set (answers whether
 * one was: the caller wakes the email worker once it commits); `null`
 * clears it.
 */
export const setOwnAddress = (
  sql: SqlClient.SqlClient,
  queue: DeliveryQueue["Service"],
  config: Pick<SvcConfigShape, "smtpUrl" | "reviewerConfirmationsPerHour" | "webhookQueueCapacity">,
  orgId: string,
  member: string,
  email: string | null
): Effect.Effect<boolean, RateLimited> =>
  Effect.gen(function*() {
    if (email === null) {
      yield* clearAddress(sql, orgId, member)
      return false
    }
    const before = yield* lockAddress(sql, orgId, member)
    let addressId: string
    if (before?.email === email) {
      if (before.accepted_at !== null && before.confirmed_at !== null) return false
      yield* sql`
        UPDATE reviewer_member_addresses SET accepted_at = coalesce(accepted_at, now()), updated_at = now()
        WHERE org_id = ${orgId} AND member = ${member}
      `.pipe(Effect.orDie)
      if (before.confirmed_at !== null) return false
      addressId = before.address_id
    } else {
      addressId = yield* storeAddress(sql, orgId, member, email, true)
    }
    // Without SMTP no mail can go: the address waits, and setting it
    // again once SMTP is configured sends the mail.
    if (Option.isNone(config.smtpUrl)) return false
    yield* claimConfirmationWindow(sql, orgId, config.reviewerConfirmationsPerHour)
    yield* queueConfirmation(queue, orgId, addressId, config.webhookQueueCapacity)
    return true
  })

/** `member`'s own address and its state: `invited` (not yet accepted by them), `pending` (accepted, mailbox not confirmed) or `confirmed`. */
export const readOwnAddress = (sql: SqlClient.SqlClient, orgId: string, member: string) =>
  AddressRows.one(sql`
    SELECT email, address_id, confirmed_at, accepted_at FROM reviewer_member_addresses WHERE org_id = ${orgId} AND member = ${member}
  `).pipe(
    Effect.orDie,
    Effect.map((row) => ({
      email: row?.email ?? null,
      email_status: row === undefined ? null : addressStatus(row.accepted_at !== null, row.confirmed_at !== null)
    }))
  )

/** The state a member's address shows. */
export const addressStatus = (accepted: boolean, confirmed: boolean): "invited" | "pending" | "confirmed" =>
  !accepted ? "invited" : confirmed ? "confirmed" : "pending"
