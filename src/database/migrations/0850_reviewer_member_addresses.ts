import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Reviewer mail to the assigned group: a group member's own address.
 *
 * - `reviewer_member_addresses`: one address per person per organization,
 *   keyed by `(org_id, member)` where `member` names the person as group
 *   members and `decided_by` do (an API key's id or `console:<person>`), so
 *   a person in two groups has one address. `address_id` names one setting
 *   of it (a new id whenever it changes), `confirmed_at` is when that
 *   setting was confirmed (null: pending), as for the organization's
 *   address (`notification_settings`, migration 0780). The confirmation
 *   links of these addresses are kept in `reviewer_confirmations` with the
 *   address's `address_id` as their `reviewer_address_id`.
 * - `approval_mail_links.member`: the member a decision link was mailed to
 *   (null for a link mailed to the organization's address): a decision
 *   through it names that member.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE IF NOT EXISTS reviewer_member_addresses (
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      member text NOT NULL,
      email text NOT NULL,
      address_id uuid NOT NULL UNIQUE,
      confirmed_at timestamptz,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (org_id, member)
    )
  `
  yield* sql`ALTER TABLE approval_mail_links ADD COLUMN IF NOT EXISTS member text`
})
