/**
 * Receiver URLs (webhook endpoints, telemetry collectors) are secrets: chat
 * and automation hooks carry their token in the path or the query. So the
 * URL is kept in the secret store (sealed with the master key, like signing
 * secrets and collector headers; the feedback scrubber knows it from there),
 * and the resource's own `url` column holds `''`. Only the `url_hint`
 * (scheme and host) is ever shown.
 *
 * Rows written before this (`url` in clear) are moved into the store when
 * the service starts (`sealStoredUrls`): sealing needs the master key, which
 * migrations do not have. Until then a clear `url` is still read, so nothing
 * breaks in between.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted, Schema } from "effect"
import { urlHint } from "../outbound/TargetUrl.ts"
import { rowsOf } from "../platform/Rows.ts"
import { type OwnerKind, type SecretOwner, SecretStore } from "./SecretStore.ts"

export const endpointUrlOwner = (orgId: string, id: string): SecretOwner => ({ orgId, kind: "notification_endpoint_url", id })
export const destinationUrlOwner = (orgId: string, id: string): SecretOwner => ({ orgId, kind: "telemetry_destination_url", id })

/** The name of the URL's secret under its owner. */
export const URL_SECRET = "url"

/** A URL moved into the store leaves this in its resource's `url` column. */
export const SEALED_URL_COLUMN = ""

/**
 * The receiver URL of `owner`: from the store, or the clear `column` of a row
 * not moved yet. `undefined` when the store has none: the receiver was
 * deleted since its row was read (the delete removes both in one
 * transaction), and the caller answers as if the row were gone.
 */
export const readReceiverUrl = (owner: SecretOwner, column: string) =>
  Effect.gen(function*() {
    if (column !== SEALED_URL_COLUMN) return column
    const secrets = yield* SecretStore
    const [stored] = yield* secrets.list(owner)
    return stored === undefined ? undefined : Redacted.value(stored.value)
  })

const hintOf = (url: string): string => {
  try {
    return urlHint(new URL(url))
  } catch {
    return "https://…"
  }
}

const UrlRow = Schema.Struct({ id: Schema.String, org_id: Schema.String, url: Schema.String })

const tables: ReadonlyArray<{ readonly table: "notification_endpoints" | "telemetry_destinations"; readonly kind: OwnerKind }> = [
  { table: "notification_endpoints", kind: "notification_endpoint_url" },
  { table: "telemetry_destinations", kind: "telemetry_destination_url" }
]

/**
 * Moves every clear receiver URL into the secret store, and rewrites its
 * hint (scheme and host only). Each row in its own transaction, claimed by
 * its clear value: processes starting together move each URL once.
 * Answers how many it moved.
 */
export const sealStoredUrls = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient
  const secrets = yield* SecretStore
  let moved = 0
  for (const { table, kind } of tables) {
    for (;;) {
      const rows = yield* rowsOf(table, UrlRow).decoded(sql`
        SELECT id, org_id, url FROM ${sql(table)} WHERE url <> ${SEALED_URL_COLUMN} LIMIT 100
      `)
      if (rows.length === 0) break
      for (const row of rows) {
        yield* sql.withTransaction(Effect.gen(function*() {
          const claimed = yield* sql`
            UPDATE ${sql(table)} SET url = ${SEALED_URL_COLUMN}, url_hint = ${hintOf(row.url)}
            WHERE id = ${row.id} AND url = ${row.url}
            RETURNING id
          `
          if (claimed.length === 0) return
          yield* secrets.put({ orgId: row.org_id, kind, id: row.id }, URL_SECRET, Redacted.make(row.url))
          moved++
        }))
      }
    }
  }
  return moved
}).pipe(Effect.orDie)

/** At start, before the server listens: no clear receiver URL stays at rest. */
export const SealReceiverUrlsLive = Layer.effectDiscard(
  Effect.tap(sealStoredUrls, (moved) => moved > 0 ? Effect.logInfo(`moved ${moved} receiver URLs into the secret store`) : Effect.void)
)
