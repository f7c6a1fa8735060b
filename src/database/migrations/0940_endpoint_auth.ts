import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * How svc authenticates to an endpoint besides signing (docs/webhooks.md,
 * "Endpoint authentication"). The columns hold what reads show: `auth` the
 * OAuth client credentials without the secret (`token_url_hint`,
 * `client_id`, ...), `client_certificate` the certificate's subject,
 * issuer, fingerprint and validity. The secrets (token URL, client secret,
 * certificate and key) are in `org_secrets`, owner kind
 * `notification_endpoint_auth`. `certificate_expires_at` and
 * `certificate_notice_at` drive `endpoint.certificate_expiring`: a notice
 * is written once per certificate, by whichever process claims the row.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE notification_endpoints ADD COLUMN IF NOT EXISTS auth jsonb`
  yield* sql`ALTER TABLE notification_endpoints ADD COLUMN IF NOT EXISTS client_certificate jsonb`
  yield* sql`ALTER TABLE notification_endpoints ADD COLUMN IF NOT EXISTS certificate_expires_at timestamptz`
  yield* sql`ALTER TABLE notification_endpoints ADD COLUMN IF NOT EXISTS certificate_notice_at timestamptz`
  yield* sql`
    CREATE INDEX IF NOT EXISTS notification_endpoints_certificate_notice_idx
    ON notification_endpoints (certificate_expires_at) WHERE certificate_notice_at IS NULL
  `
})
