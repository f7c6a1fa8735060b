/**
 * The secret store: every secret `svc` holds for an organization (webhook
 * signing secrets, custom header values and authentication credentials,
 * collector header values, receiver URLs), sealed with the master key
 * (`SecretBox`) and owned by one resource. Nothing here ever returns a
 * secret through the API; callers decide what leaves the process.
 *
 * Because every such secret lives here, `orgValues` is the one place the
 * feedback scrubber learns an organization's known credentials from.
 */
import { Context, Effect, Layer, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { SecretBox } from "../platform/Crypto.ts"
import { newId } from "../platform/Ids.ts"
import { rowsOf, Timestamp, TimestampOrNull } from "../platform/Rows.ts"

/**
 * Who a secret belongs to. Receiver URLs (an endpoint's or a collector's:
 * they often carry a token in their path or query) are secrets of their
 * own kind, beside the resource's other secrets (`ReceiverUrls.ts`).
 */
export type OwnerKind =
  | "notification_endpoint"
  | "notification_endpoint_header"
  | "notification_endpoint_auth"
  | "notification_endpoint_certificate"
  | "telemetry_destination"
  | "notification_endpoint_url"
  | "telemetry_destination_url"
  | "mcp_server_url"
  | "mcp_server_header"

export interface SecretOwner {
  readonly orgId: string
  readonly kind: OwnerKind
  readonly id: string
}

export interface StoredSecret {
  readonly id: string
  readonly name: string
  readonly value: Redacted.Redacted<string>
  readonly created_at: string
  /** When set, the secret stops being used after this instant (rotation overlap). */
  readonly expires_at: string | null
}

const SealedRow = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  sealed: Schema.String,
  created_at: Timestamp,
  expires_at: TimestampOrNull
})
type Row = typeof SealedRow.Type
const SealedRows = rowsOf("org_secrets", SealedRow)

const context = (id: string) => `org_secret:${id}`

export class SecretStore extends Context.Service<SecretStore, {
  /** Stores `value` under `owner` and `name`; returns the secret's id. Runs in the caller's transaction if any. */
  readonly put: (
    owner: SecretOwner,
    name: string,
    value: Redacted.Redacted<string>,
    expiresAt?: Date
  ) => Effect.Effect<string>
  /** The owner's secrets that have not expired, newest first. */
  readonly list: (owner: SecretOwner) => Effect.Effect<ReadonlyArray<StoredSecret>>
  /** Sets (or clears) when a secret stops being used. */
  readonly expire: (owner: SecretOwner, secretId: string, at: Date | null) => Effect.Effect<void>
  /** Removes every secret of the owner. */
  readonly removeOwner: (owner: SecretOwner) => Effect.Effect<void>
  /** Every secret value of the organization, expired ones included (the scrubber's list). */
  readonly orgValues: (orgId: string) => Effect.Effect<ReadonlyArray<Redacted.Redacted<string>>>
}>()("svc/secrets/SecretStore") {
  static readonly layer = Layer.effect(
    SecretStore,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const box = yield* SecretBox

      // A row we sealed ourselves that no longer opens means the master key
      // changed or the row was tampered with: a defect, not a user error.
      const open = (row: Row) => Effect.orDie(box.open(row.sealed, context(row.id)))

      const put = Effect.fn("SecretStore.put")(function*(
        owner: SecretOwner,
        name: string,
        value: Redacted.Redacted<string>,
        expiresAt?: Date
      ) {
        const id = newId()
        yield* sql`
          INSERT INTO org_secrets (id, org_id, owner_kind, owner_id, name, sealed, expires_at)
          VALUES (${id}, ${owner.orgId}, ${owner.kind}, ${owner.id}, ${name},
                  ${box.seal(Redacted.value(value), context(id))}, ${expiresAt ?? null})
        `.pipe(Effect.orDie)
        return id
      })

      const list = Effect.fn("SecretStore.list")(function*(owner: SecretOwner) {
        const rows = yield* SealedRows.all(sql`
          SELECT id, name, sealed, created_at, expires_at FROM org_secrets
          WHERE org_id = ${owner.orgId} AND owner_kind = ${owner.kind} AND owner_id = ${owner.id}
            AND (expires_at IS NULL OR expires_at > now())
          ORDER BY created_at DESC, id DESC
        `)
        return yield* Effect.forEach(rows, (row) =>
          Effect.map(open(row), (value) => ({
            id: row.id,
            name: row.name,
            value,
            created_at: row.created_at,
            expires_at: row.expires_at
          })))
      })

      const expire = Effect.fn("SecretStore.expire")(function*(owner: SecretOwner, secretId: string, at: Date | null) {
        yield* sql`
          UPDATE org_secrets SET expires_at = ${at}
          WHERE id = ${secretId} AND org_id = ${owner.orgId} AND owner_kind = ${owner.kind} AND owner_id = ${owner.id}
        `.pipe(Effect.orDie)
      })

      const removeOwner = Effect.fn("SecretStore.removeOwner")(function*(owner: SecretOwner) {
        yield* sql`
          DELETE FROM org_secrets
          WHERE org_id = ${owner.orgId} AND owner_kind = ${owner.kind} AND owner_id = ${owner.id}
        `.pipe(Effect.orDie)
      })

      const orgValues = Effect.fn("SecretStore.orgValues")(function*(orgId: string) {
        const rows = yield* SealedRows.all(sql`
          SELECT id, name, sealed, created_at, expires_at FROM org_secrets WHERE org_id = ${orgId}
        `)
        return yield* Effect.forEach(rows, open)
      })

      return SecretStore.of({ put, list, expire, removeOwner, orgValues })
    })
  )
}
