/**
 * Reviewer group members' own addresses (docs/approvals.md, "Reviewer
 * mail to the group"): one per person per organization
 * (`reviewer_member_addresses`, keyed by the person as group members and
 * `decided_by` name them), set with the members of any group
 * (`PUT /v1/reviewer-groups/:name`, a member's `email`).
 *
 * An address is confirmed exactly as the organization's is
 * (`notifications/ReviewerAddress.ts`, `AddressConfirmations.ts`): a new one is `pending`, gets a new setting id and
 * one confirmation mail (counted in the organization's hourly bound), and
 * receives no approval mail before its link is used. Setting the address a
 * person already has changes nothing, except that a pending one gets a new
 * confirmation mail; `null` clears it. A new setting id (or none) ends
 * every link mailed under the previous one (`MailLinks.ts` checks it).
 */
import { Effect, Option, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import type { RateLimited } from "../api/Errors.ts"
import { deciderOf, type GroupMemberInput } from "../api/Reviewers.ts"
import type { DeliveryQueue } from "../deliveries/DeliveryQueue.ts"
import type { SvcConfigShape } from "../platform/Config.ts"
import { newId } from "../platform/Ids.ts"
import { InstantOrNull, rowsOf } from "../platform/Rows.ts"
import { claimConfirmationWindow, queueConfirmation } from "./AddressConfirmations.ts"

/** Meta key of an approval mail's delivery to a member's own address: that address setting's id. */
export const MEMBER_META_KEY = "member_address"

const AddressRows = rowsOf("reviewer_member_addresses", Schema.Struct({
  email: Schema.String,
  address_id: Schema.String,
  confirmed_at: InstantOrNull
}))

/**
 * Stores the addresses `members` give (in the caller's transaction): each
 * new or pending one is queued its confirmation mail when SMTP is set.
 * Answers whether any mail was queued (the caller wakes the email worker
 * once it commits).
 */
export const writeMemberAddresses = (
  sql: SqlClient.SqlClient,
  queue: DeliveryQueue["Service"],
  config: Pick<SvcConfigShape, "smtpUrl" | "reviewerConfirmationsPerHour" | "webhookQueueCapacity">,
  orgId: string,
  members: ReadonlyArray<GroupMemberInput>
): Effect.Effect<boolean, RateLimited> =>
  Effect.gen(function*() {
    let mailed = false
    for (const input of members) {
      if (input.email === undefined) continue
      const member = deciderOf(input)
      if (input.email === null) {
        yield* sql`DELETE FROM reviewer_member_addresses WHERE org_id = ${orgId} AND member = ${member}`.pipe(Effect.orDie)
        continue
      }
      const before = yield* AddressRows.one(sql`
        SELECT email, address_id, confirmed_at FROM reviewer_member_addresses WHERE org_id = ${orgId} AND member = ${member} FOR UPDATE
      `).pipe(Effect.orDie)
      const same = before?.email === input.email
      if (same && before?.confirmed_at !== null) continue
      const addressId = same ? before!.address_id : newId()
      yield* sql`
        INSERT INTO reviewer_member_addresses (org_id, member, email, address_id, confirmed_at, updated_at)
        VALUES (${orgId}, ${member}, ${input.email}, ${addressId}, NULL, now())
        ON CONFLICT (org_id, member) DO UPDATE SET email = EXCLUDED.email, address_id = EXCLUDED.address_id,
          confirmed_at = NULL, updated_at = now()
      `.pipe(Effect.orDie)
      // Without SMTP no mail can go: the address waits, and setting it
      // again once SMTP is configured sends the mail.
      if (Option.isNone(config.smtpUrl)) continue
      yield* claimConfirmationWindow(sql, orgId, config.reviewerConfirmationsPerHour)
      yield* queueConfirmation(queue, orgId, addressId, config.webhookQueueCapacity)
      mailed = true
    }
    return mailed
  })
