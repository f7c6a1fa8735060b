import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The bound a delivery target shares with others (`share_group`): for a
 * webhook endpoint its organization and destination host (and port), the
 * per-host bound of `SVC_WEBHOOK_PER_HOST`. The claim answers it with each
 * delivery it hands out, so the worker admits a claimed delivery without
 * asking the sender. Written when an endpoint is created (its URL does not
 * change); existing endpoints get it from their URL hint (scheme, host and
 * port), with a target row where they had none.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE delivery_targets ADD COLUMN IF NOT EXISTS share_group text`
  yield* sql`
    INSERT INTO delivery_targets AS t (id, org_id, kind, share_group)
    SELECT e.id, e.org_id, 'webhook', e.org_id::text || ' ' || split_part(split_part(e.url_hint, '://', 2), '/', 1)
    FROM notification_endpoints e
    ON CONFLICT (id) DO UPDATE SET share_group = EXCLUDED.share_group
  `
})
