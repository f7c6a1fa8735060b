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
import type { SqlClient, SqlError } from "effect/sql"
import { urlHint } from "../outbound/TargetUrl.ts"
import { rowsOf } from "../platform/Rows.ts"
import { type OwnerKind, type SecretOwner, SecretStore } from "./SecretStore.ts"

export const endpointUrlOwner = (orgId: string, id: string): SecretOwner => ({
  orgId,
  kind: "notification_endpoint_url",
  id
})
export const destinationUrlOwner = (orgId: string, id: string): SecretOwner => ({
  orgId,
  kind: "telemetry_destination_url",
  id
})

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

/** A receiver's row with its URL. */
const ClearUrlRow = Schema.Struct({ id: Schema.String, org_id: Schema.String, url: Schema.String })

/**
 * The statements of the owner of a table of receivers (their folder writes
 * it): a page of rows whose URL is still in clear (`url` not
 * `SEALED_URL_COLUMN`), and the claim of one, which seals its `url` column
 * and sets its `hint` only while it still holds the clear `url` it was read with.
 */
export interface ClearUrls {
  readonly kind: OwnerKind
  readonly table: string
  readonly clear: (sql: SqlClient.SqlClient) => Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>
  readonly claim: (
    sql: SqlClient.SqlClient,
    row: typeof ClearUrlRow.Type,
    hint: string
  ) => Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>
}

/**
 * Moves every clear receiver URL of `owners` into the secret store, and
 * rewrites its hint (scheme and host only). Each row in its own
 * transaction, claimed by its clear value: processes starting together
 * move each URL once. Answers how many it moved.
 */
export const sealStoredUrls = (owners: ReadonlyArray<ClearUrls>) =>
  Effect.gen(function*() {
    const sql = yield* PgClient.PgClient
    const secrets = yield* SecretStore
    let moved = 0
    for (const owner of owners) {
      for (;;) {
        const rows = yield* rowsOf(owner.table, ClearUrlRow).decoded(owner.clear(sql))
        if (rows.length === 0) break
        for (const row of rows) {
          yield* sql.withTransaction(Effect.gen(function*() {
            const claimed = yield* owner.claim(sql, row, hintOf(row.url))
            if (claimed.length === 0) return
            yield* secrets.put({ orgId: row.org_id, kind: owner.kind, id: row.id }, URL_SECRET, Redacted.make(row.url))
            moved++
          }))
        }
      }
    }
    return moved
  }).pipe(Effect.orDie)

/** At start, before the server listens: no clear receiver URL stays at rest. */
export const sealReceiverUrls = (owners: ReadonlyArray<ClearUrls>) =>
  Layer.effectDiscard(
    Effect.tap(sealStoredUrls(owners), (moved) =>
      moved > 0 ? Effect.logInfo(`moved ${moved} receiver URLs into the secret store`) : Effect.void)
  )
