/**
 * Organizations and API keys. A key is shown once, at creation; only its
 * SHA-256 is stored (keys carry 256 random bits, so a slow hash adds
 * nothing).
 *
 * Authentication goes through a bounded cache keyed by the key's hash
 * (`KEY_CACHE_TTL`, `KEY_CACHE_CAPACITY`): a known key is looked up in the
 * database at most once per lifetime per process instead of on every
 * request. Unknown keys are never cached (a key created by the CLI works
 * at once). Revocation bound: the revoking process evicts the key at once;
 * on a PostgreSQL server the revocation's NOTIFY (sent at commit) evicts it
 * in every listening process; otherwise (the embedded database, whose
 * socket carries no notifications, or a revocation by direct SQL, or while
 * a listener reconnects) a revoked key is refused at the latest
 * `KEY_CACHE_TTL` after the revocation committed.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Data, Duration, Effect, Layer, Option, Schema, type Scope } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import { type Principal, ScopeName } from "../api/Security.ts"
import { DatabaseInfo } from "../database/Database.ts"
import { keepListening } from "../database/Wakeups.ts"
import { randomToken } from "../platform/Crypto.ts"
import { sha256Hex } from "../platform/Digest.ts"
import { newId } from "../platform/Ids.ts"
import { countForCap } from "../platform/OrgLimits.ts"
import { rowsOf, Timestamp, TimestampOrNull } from "../platform/Rows.ts"
import { makeKeyCache } from "./KeyCache.ts"
import { KEY_PREFIX } from "./KeyFormat.ts"

/** Longest a process keeps authenticating a key from memory: the cross-process revocation bound without NOTIFY. */
export const KEY_CACHE_TTL = Duration.seconds(2)
/** Keys each process keeps in memory (least recently used dropped). */
export const KEY_CACHE_CAPACITY = 10_000
/** NOTIFY channel of revocations on a PostgreSQL server; the payload is the key's hash. */
export const KEY_REVOKED_CHANNEL = "svc_key_revoked"

export interface Org {
  readonly id: string
  readonly name: string
  readonly created_at: string
}

export interface CreatedKey {
  readonly id: string
  readonly org_id: string
  readonly name: string | null
  readonly key: string
  readonly scopes: ReadonlyArray<ScopeName>
  readonly created_at: string
}

export interface KeyInfo {
  readonly id: string
  readonly org_id: string
  readonly name: string | null
  readonly key_prefix: string
  readonly scopes: ReadonlyArray<ScopeName>
  readonly created_at: string
  readonly revoked_at: string | null
  /** Who made the key (`console:<name>`, or the id of the key that made it); null when made with the CLI. */
  readonly created_by: string | null
}

export class OrgNotFound extends Data.TaggedError("OrgNotFound")<{ readonly orgId: string }> {}
export class KeyNotFound extends Data.TaggedError("KeyNotFound")<{ readonly keyId: string }> {}
/** The organization already has `maxActive` unrevoked keys. */
export class KeyCapReached extends Data.TaggedError("KeyCapReached")<{ readonly maxActive: number }> {}

const KeyColumns = Schema.Struct({
  id: Schema.String,
  org_id: Schema.String,
  name: Schema.NullOr(Schema.String),
  key_prefix: Schema.String,
  scopes: Schema.Array(ScopeName),
  created_at: Timestamp,
  revoked_at: TimestampOrNull,
  created_by: Schema.NullOr(Schema.String)
})
const KeyRows = rowsOf("api_keys", KeyColumns)
const RevokedRows = rowsOf("api_keys", Schema.Struct({ ...KeyColumns.fields, key_hash: Schema.String }))
const PrincipalRows = rowsOf(
  "api_keys",
  Schema.Struct({ id: Schema.String, org_id: Schema.String, scopes: Schema.Array(ScopeName) })
)
const HashRows = rowsOf("api_keys", Schema.Struct({ key_hash: Schema.String }))
const OrgRows = rowsOf("orgs", Schema.Struct({ id: Schema.String, name: Schema.String, created_at: Timestamp }))
const CreatedRows = rowsOf("orgs", Schema.Struct({ created_at: Timestamp }))
/** The advisory lock that makes an organization name's check and insert one step (any value no other lock uses). */
const CreatedKeyRows = rowsOf("api_keys", Schema.Struct({ created_at: Timestamp }))

const keyInfo = (
  { id, org_id, name, key_prefix, scopes, created_at, revoked_at, created_by }: typeof KeyColumns.Type
): KeyInfo => ({
  id,
  org_id,
  name,
  key_prefix,
  scopes,
  created_at,
  revoked_at,
  created_by
})

export interface NewKey {
  readonly orgId: string
  readonly scopes: ReadonlyArray<ScopeName>
  readonly name?: string | undefined
  /** Refuse when the organization already has this many unrevoked keys (counted under its row lock, so concurrent creates cannot pass it). */
  readonly maxActive?: number | undefined
  /** Who makes it (the request's actor); omitted by the CLI. */
  readonly createdBy?: string | undefined
}

export class Identity extends Context.Service<Identity, {
  /** A new organization. Names need not be unique: `namesakes` tells a person who is about to make a second one. */
  readonly createOrg: (name: string) => Effect.Effect<Org>
  /** The organizations whose name is `name` compared in any case, oldest first (at most 10). */
  readonly namesakes: (name: string) => Effect.Effect<ReadonlyArray<Org>>
  readonly listOrgs: Effect.Effect<ReadonlyArray<Org>>
  readonly getOrg: (orgId: string) => Effect.Effect<Org, OrgNotFound>
  readonly createKey: (input: NewKey) => Effect.Effect<CreatedKey, OrgNotFound | KeyCapReached>
  readonly listKeys: (orgId: string) => Effect.Effect<ReadonlyArray<KeyInfo>, OrgNotFound>
  readonly revokeKey: (keyId: string) => Effect.Effect<KeyInfo, KeyNotFound>
  /**
   * Deletes the organization and every row of it, in one transaction: its
   * keys are refused at once, in every process (as a revocation is).
   */
  readonly deleteOrg: (orgId: string) => Effect.Effect<{ readonly keys: number }, OrgNotFound>
  /** The principal for a presented key; `None` when unknown or revoked. */
  readonly authenticate: (key: string) => Effect.Effect<Option.Option<Principal>>
  /** Hashes of every key the organization has had, revoked ones included (the feedback scrubber removes those too). */
  readonly keyHashes: (orgId: string) => Effect.Effect<ReadonlySet<string>>
  /**
   * A key that authenticates in this process only, while the scope is
   * open, as a principal of an organization that does not exist, with
   * `scopes`: the requests a start rehearses before it listens
   * (`server/WarmRequest.ts`) go through authentication as a client's do,
   * and reach no organization's data. Never stored.
   */
  readonly rehearsalKey: (scopes: ReadonlyArray<ScopeName>) => Effect.Effect<string, never, Scope.Scope>
}>()("svc/identity/Identity") {
  static readonly layer = Layer.effect(
    Identity,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const info = yield* DatabaseInfo

      // Principals of known, unrevoked keys by key hash (`KeyCache.ts`): a
      // miss or an unknown key is not kept, so only positive answers are
      // served from memory.
      const principals = makeKeyCache({
        lookup: (hash: string) =>
          PrincipalRows.one(sql`
            SELECT id, org_id, scopes FROM api_keys WHERE key_hash = ${hash} AND revoked_at IS NULL
          `).pipe(
            Effect.map((row) =>
              row === undefined
                ? Option.none<Principal>()
                : Option.some<Principal>({
                  orgId: row.org_id,
                  keyId: row.id,
                  actor: row.id,
                  scopes: new Set(row.scopes)
                })
            )
          ),
        ttlMs: Duration.toMillis(KEY_CACHE_TTL),
        capacity: KEY_CACHE_CAPACITY
      })
      if (info.supportsNotify) {
        yield* keepListening({
          sql,
          channel: KEY_REVOKED_CHANNEL,
          handle: (hash) => Effect.sync(() => principals.invalidate(hash)),
          // Revocations sent while we were not listening are unknown: forget every key.
          resync: Effect.sync(principals.invalidateAll),
          what: "the key revocation listener"
        })
      }

      const getOrg = Effect.fn("Identity.getOrg")(function*(orgId: string) {
        const row = yield* OrgRows.one(sql`SELECT id, name, created_at FROM orgs WHERE id = ${orgId}`)
        if (row === undefined) return yield* new OrgNotFound({ orgId })
        return row
      })

      const createOrg = Effect.fn("Identity.createOrg")(function*(name: string) {
        const id = newId()
        const { created_at } = yield* CreatedRows.returned(sql`
          INSERT INTO orgs (id, name) VALUES (${id}, ${name}) RETURNING created_at
        `)
        return { id, name, created_at }
      })

      const namesakes = (name: string) =>
        OrgRows.all(
          sql`SELECT id, name, created_at FROM orgs WHERE lower(name) = lower(${name}) ORDER BY created_at, id LIMIT 10`
        ).pipe(
          Effect.withSpan("Identity.namesakes")
        )

      const listOrgs = OrgRows.all(sql`SELECT id, name, created_at FROM orgs ORDER BY created_at, id`).pipe(
        Effect.withSpan("Identity.listOrgs")
      )

      const createKey = Effect.fn("Identity.createKey")(function*(input: NewKey) {
        yield* getOrg(input.orgId)
        const id = newId()
        const key = randomToken(KEY_PREFIX)
        const scopes = [...new Set(input.scopes)]
        const createdBy = input.createdBy ?? null
        // The person the key belongs to, for good: its maker's (a console
        // person, or the person of the key that made it), else itself.
        const personOf = createdBy === null ?
          sql`${id}` :
          createdBy.startsWith("console:") ?
          sql`${createdBy}` :
          sql`coalesce((
          SELECT coalesce(maker.person, maker.id::text) FROM api_keys maker WHERE maker.id::text = ${createdBy} AND maker.org_id = ${input.orgId}
        ), ${createdBy})`
        const insert = CreatedKeyRows.returned(sql`
          INSERT INTO api_keys (id, org_id, name, key_hash, key_prefix, scopes, created_by, person)
          VALUES (${id}, ${input.orgId}, ${input.name ?? null}, ${sha256Hex(key)}, ${
          key.slice(0, 12)
        }, ${scopes}, ${createdBy}, ${personOf})
          RETURNING created_at
        `)
        const maxActive = input.maxActive
        const { created_at } = maxActive === undefined ? yield* insert : yield* sql.withTransaction(
          Effect.gen(function*() {
            if ((yield* countForCap(sql, input.orgId, "api_keys", maxActive)) >= maxActive) {
              return yield* new KeyCapReached({ maxActive })
            }
            return yield* insert
          })
        ).pipe(Effect.catchTag("SqlError", Effect.die))
        return {
          id,
          org_id: input.orgId,
          name: input.name ?? null,
          key,
          scopes,
          created_at
        }
      })

      const listKeys = Effect.fn("Identity.listKeys")(function*(orgId: string) {
        yield* getOrg(orgId)
        const rows = yield* KeyRows.all(sql`
          SELECT id, org_id, name, key_prefix, scopes, created_at, revoked_at, created_by
          FROM api_keys WHERE org_id = ${orgId} ORDER BY created_at, id
        `)
        return rows.map(keyInfo)
      })

      const revokeKey = Effect.fn("Identity.revokeKey")(function*(keyId: string) {
        const update = sql`
          UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = ${keyId}
          RETURNING key_hash, id, org_id, name, key_prefix, scopes, created_at, revoked_at, created_by
        `
        // On a server the NOTIFY is part of the statement: it is sent when
        // (and only if) the revocation commits, by whichever process revokes
        // (the CLI included).
        const row = yield* RevokedRows.one(
          info.supportsNotify
            ? sql`
              WITH revoked AS (${update})
              SELECT revoked.*, pg_notify(${KEY_REVOKED_CHANNEL}, revoked.key_hash) FROM revoked
            `
            : sql`${update}`
        )
        if (row === undefined) return yield* new KeyNotFound({ keyId })
        principals.invalidate(row.key_hash)
        return keyInfo(row)
      })

      const deleteOrg = Effect.fn("Identity.deleteOrg")(function*(orgId: string) {
        const hashes = yield* sql.withTransaction(Effect.gen(function*() {
          const keys = yield* HashRows.all(sql`SELECT key_hash FROM api_keys WHERE org_id = ${orgId}`)
          // Every table of an organization goes with its row: by ON DELETE
          // CASCADE, or by the triggers on `orgs` for the tables that keep
          // no foreign key to it (`0600_delivery_enqueue_costs.ts`,
          // `0620_governed_steps.ts`, `0670_delivery_log.ts`).
          const deleted = yield* sql`DELETE FROM orgs WHERE id = ${orgId} RETURNING id`
          if (deleted.length === 0) return yield* new OrgNotFound({ orgId })
          // Sent at commit, as a revocation's: other processes forget the keys.
          if (info.supportsNotify) {
            for (const key of keys) yield* sql`SELECT pg_notify(${KEY_REVOKED_CHANNEL}, ${key.key_hash})`
          }
          return keys.map((key) => key.key_hash)
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        for (const hash of hashes) principals.invalidate(hash)
        return { keys: hashes.length }
      })

      // Untraced: it runs on every request, and the request span carries
      // the organization and key id (see `AuthenticationLive`).
      const authenticate = (key: string): Effect.Effect<Option.Option<Principal>> =>
        !key.startsWith(KEY_PREFIX) || key.length > 200
          ? Effect.succeedNone
          : principals.get(sha256Hex(key))

      const keyHashes = Effect.fn("Identity.keyHashes")(function*(orgId: string) {
        const rows = yield* HashRows.all(sql`SELECT key_hash FROM api_keys WHERE org_id = ${orgId}`)
        return new Set(rows.map((row) => row.key_hash))
      })

      const rehearsalKey = (scopes: ReadonlyArray<ScopeName>) =>
        Effect.acquireRelease(
          Effect.sync(() => {
            const key = randomToken(KEY_PREFIX)
            const id = newId()
            principals.hold(sha256Hex(key), { orgId: newId(), keyId: id, actor: id, scopes: new Set(scopes) })
            return key
          }),
          (key) => Effect.sync(() => principals.invalidate(sha256Hex(key)))
        )

      return Identity.of({
        createOrg,
        namesakes,
        listOrgs,
        getOrg,
        createKey,
        listKeys,
        revokeKey,
        deleteOrg,
        authenticate,
        keyHashes,
        rehearsalKey
      })
    })
  )
}

/** Deletes API keys revoked before `before`, the first revoked first (`retention/Retention.ts`): at most `batch`, skipping rows another statement holds; answers the rows. */
export const pruneRevokedKeys = (sql: SqlClient.SqlClient, before: Statement.Fragment, batch: number) =>
  sql`
    DELETE FROM api_keys WHERE id IN (
      SELECT id FROM api_keys WHERE revoked_at < ${before} ORDER BY revoked_at LIMIT ${batch} FOR UPDATE SKIP LOCKED
    )
    RETURNING 1 AS deleted
  `
