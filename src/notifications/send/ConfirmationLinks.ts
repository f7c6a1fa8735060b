/**
 * The link a confirmation mail carries (`Email.ts` sends it): its token,
 * issued for one pending reviewer address, and the console page it opens.
 * `ReviewerAddress.ts` checks the link when it is used.
 */
import { Duration, Effect, Option, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { randomToken } from "../../platform/Crypto.ts"
import { sha256Hex } from "../../platform/Digest.ts"
import { Instant, rowsOf } from "../../platform/Rows.ts"

/** Tokens of confirmation links start with this (the scrubber knows the shape). */
export const CONFIRMATION_PREFIX = "svr_"

/** The console page a confirmation mail links to; the token goes in the fragment, which browsers never send. */
export const confirmationUrl = (baseUrl: string, token: string) => `${baseUrl}/console/confirm-address#${token}`

const IssuedRows = rowsOf(
  "reviewer_confirmations",
  Schema.Struct({ reviewer_email: Schema.String, expires_at: Instant })
)

/**
 * Makes the link of one confirmation mail for the address setting
 * `addressId`, while it is the organization's and still pending: the token
 * (only the mail holds it), the address and when the link expires.
 */
export const issueConfirmation = (sql: SqlClient.SqlClient, orgId: string, addressId: string, ttl: Duration.Duration) =>
  Effect.gen(function*() {
    const token = randomToken(CONFIRMATION_PREFIX)
    // The setting is the organization's address or a group member's own
    // (reviewer_member_addresses): address ids are unique across both.
    const row = yield* IssuedRows.one(sql`
      INSERT INTO reviewer_confirmations (token_hash, org_id, reviewer_address_id, reviewer_email, expires_at)
      SELECT ${sha256Hex(token)}, org_id, address_id, email, now() + make_interval(secs => ${Duration.toSeconds(ttl)})
      FROM (
        SELECT org_id, reviewer_address_id AS address_id, reviewer_email AS email FROM notification_settings
        WHERE org_id = ${orgId} AND reviewer_address_id = ${addressId} AND reviewer_email IS NOT NULL
          AND reviewer_confirmed_at IS NULL
        UNION ALL
        SELECT org_id, address_id, email FROM reviewer_member_addresses
        WHERE org_id = ${orgId} AND address_id = ${addressId} AND confirmed_at IS NULL AND accepted_at IS NOT NULL
      ) pending
      RETURNING reviewer_email, expires_at
    `)
    return row === undefined
      ? Option.none()
      : Option.some({ token, address: row.reviewer_email, expiresAt: row.expires_at })
  }).pipe(Effect.orDie)
