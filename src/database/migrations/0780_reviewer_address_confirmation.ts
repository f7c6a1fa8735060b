import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * A reviewer address decides approvals only once its mailbox has shown it
 * reads svc's mail.
 *
 * - `notification_settings.reviewer_address_id` names one setting of the
 *   address: a new id whenever the address changes (cleared with it).
 *   `reviewer_confirmed_at` is when that address was confirmed (null:
 *   pending). Addresses set before this migration were never confirmed:
 *   they start pending.
 * - `reviewer_confirmations`: the one-time links of confirmation mails
 *   (only the token's SHA-256 is kept, with the setting it confirms and
 *   when it expires).
 * - `approval_mail_links.reviewer_address_id`: the setting a decision link
 *   was mailed under; the link works while that setting is the
 *   organization's current, confirmed address. Links made before this
 *   migration have none and open nothing.
 * - `confirm_window_at`, `confirm_count`: confirmation mails of the
 *   organization in the current one-hour window
 *   (`SVC_REVIEWER_CONFIRMATIONS_PER_HOUR`).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE notification_settings
      ADD COLUMN reviewer_address_id uuid,
      ADD COLUMN reviewer_confirmed_at timestamptz,
      ADD COLUMN confirm_window_at timestamptz,
      ADD COLUMN confirm_count int NOT NULL DEFAULT 0
  `
  yield* sql`UPDATE notification_settings SET reviewer_address_id = gen_random_uuid() WHERE reviewer_email IS NOT NULL`
  yield* sql`ALTER TABLE approval_mail_links ADD COLUMN reviewer_address_id uuid`
  yield* sql`
    CREATE TABLE reviewer_confirmations (
      token_hash text PRIMARY KEY,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      reviewer_address_id uuid NOT NULL,
      reviewer_email text NOT NULL,
      expires_at timestamptz NOT NULL,
      used_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now()
    )
  `
  yield* sql`CREATE INDEX reviewer_confirmations_org_idx ON reviewer_confirmations (org_id)`
})
