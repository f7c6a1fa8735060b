/** The endpoints' URLs still in clear, and the claim that seals one, for their move into the secret store at start (`secrets/ReceiverUrls.ts`). */
import { type ClearUrls, SEALED_URL_COLUMN } from "../secrets/ReceiverUrls.ts"

export const endpointClearUrls: ClearUrls = {
  kind: "notification_endpoint_url",
  table: "notification_endpoints",
  clear: (sql) => sql`SELECT id, org_id, url FROM notification_endpoints WHERE url <> ${SEALED_URL_COLUMN} LIMIT 100`,
  claim: (sql, row, hint) =>
    sql`UPDATE notification_endpoints SET url = ${SEALED_URL_COLUMN}, url_hint = ${hint} WHERE id = ${row.id} AND url = ${row.url} RETURNING id`
}
