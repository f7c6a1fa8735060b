/**
 * Delegations (docs/approvals.md, "Reviewer groups"): a member hands their
 * reviewing to another person for a time window, in which the delegate may
 * decide the approvals assigned to the member's groups (`Deciders.ts`
 * reads them when a decision is made).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Schema } from "effect"
import { deciderOf, reviewerOf } from "../api/Deciders.ts"
import { type Delegation, type DelegationInput, MAX_DELEGATION_DAYS } from "../api/Delegations.ts"
import { InvalidRequest, type LimitReached, NotFound } from "../api/Errors.ts"
import { SvcConfig } from "../platform/Config.ts"
import { newId } from "../platform/Ids.ts"
import { refuseAtCap } from "../platform/OrgLimits.ts"
import { rowsOf, Timestamp, TimestampOrNull } from "../platform/Rows.ts"
import { databaseNow } from "../platform/Time.ts"
import { firstUnfitKey } from "./Deciders.ts"

const DelegationRow = Schema.Struct({
  id: Schema.String,
  delegator: Schema.String,
  delegate: Schema.String,
  starts_at: Timestamp,
  ends_at: Timestamp,
  ended_at: TimestampOrNull
})
const DelegationRows = rowsOf("reviewer_delegations", DelegationRow)

const DELEGATION_COLUMNS = "id, delegator, delegate, starts_at, ends_at, ended_at"

const KeyNameRows = rowsOf("api_keys", Schema.Struct({ id: Schema.String, name: Schema.String }))

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** The API keys (by id) a delegation names as delegator or delegate; console persons are not keys. */
const keyIdsOf = (row: typeof DelegationRow.Type) =>
  [row.delegator, row.delegate].filter((decider) => UUID.test(decider))

const toDelegation = (row: typeof DelegationRow.Type, names: ReadonlyMap<string, string>): Delegation => {
  const named = keyIdsOf(row).flatMap((id) => {
    const name = names.get(id)
    return name === undefined ? [] : [[id, name] as const]
  })
  return {
    delegation_id: row.id,
    delegator: reviewerOf(row.delegator),
    delegate: reviewerOf(row.delegate),
    starts_at: row.starts_at,
    ends_at: row.ends_at,
    ended_at: row.ended_at,
    ...(named.length === 0 ? {} : { key_names: Object.fromEntries(named) })
  }
}

export class Delegations extends Context.Service<Delegations, {
  /** `actor` delegates their reviewing to `input.delegate` for the window it gives. */
  readonly delegate: (
    orgId: string,
    actor: string,
    input: DelegationInput
  ) => Effect.Effect<Delegation, InvalidRequest | NotFound | LimitReached>
  /** The organization's delegations not yet over, by start. */
  readonly list: (orgId: string) => Effect.Effect<ReadonlyArray<Delegation>>
  /** Ends one of `actor`'s own delegations now (one already over is answered as it is). */
  readonly end: (orgId: string, actor: string, delegationId: string) => Effect.Effect<Delegation, NotFound>
}>()("svc/approvals/Delegations") {
  static readonly layer = Layer.effect(
    Delegations,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const config = yield* SvcConfig

      /**
       * The delegations with the names of the keys they name: one read of
       * the organization's named keys among them (a person deciding reads
       * who a key is without `keys.manage`; only the name, never the key).
       */
      const named = Effect.fn("Delegations.named")(
        function*(orgId: string, rows: ReadonlyArray<typeof DelegationRow.Type>) {
          const ids = [...new Set(rows.flatMap(keyIdsOf))]
          const found = ids.length === 0 ? [] : yield* KeyNameRows.all(sql`
            SELECT id::text AS id, name FROM api_keys
            WHERE org_id = ${orgId} AND name IS NOT NULL AND id IN ${sql.in(ids)}
          `)
          const names = new Map(found.map((key) => [key.id, key.name]))
          return rows.map((row) => toDelegation(row, names))
        }
      )
      const namedOne = (orgId: string, row: typeof DelegationRow.Type) =>
        Effect.map(named(orgId, [row]), (delegations) => delegations[0]!)

      const delegate = Effect.fn("Delegations.delegate")(
        function*(orgId: string, actor: string, input: DelegationInput) {
          const delegate = deciderOf(input.delegate)
          if (delegate === actor) {
            return yield* new InvalidRequest({ field: "delegate", detail: "A person cannot delegate to themselves." })
          }
          if ((yield* firstUnfitKey(sql, orgId, [input.delegate])) !== undefined) {
            return yield* new NotFound({
              detail: "No active API key of the organization holding approvals.decide has the id delegate.key_id names."
            })
          }
          const now = yield* Effect.orDie(databaseNow(sql))
          const startsAt = input.starts_at === undefined ? now : Date.parse(input.starts_at)
          const endsAt = Date.parse(input.ends_at)
          if (endsAt <= Math.max(startsAt, now) || endsAt - startsAt > MAX_DELEGATION_DAYS * 86_400_000) {
            return yield* new InvalidRequest({
              field: "ends_at",
              detail:
                `ends_at must be in the future, after starts_at, and at most ${MAX_DELEGATION_DAYS} days after it.`
            })
          }
          const row = yield* sql.withTransaction(Effect.gen(function*() {
            const max = config.reviewerLimits.delegations
            yield* refuseAtCap(sql, orgId, "reviewer_delegations", {
              value: max,
              limit: "SVC_MAX_DELEGATIONS_PER_ORG",
              detail:
                `The organization already has ${max} delegations not yet over, the most allowed (SVC_MAX_DELEGATIONS_PER_ORG).`
            })
            return yield* DelegationRows.returned(sql`
            INSERT INTO reviewer_delegations (id, org_id, delegator, delegate, starts_at, ends_at)
            VALUES (${newId()}, ${orgId}, ${actor}, ${delegate}, ${new Date(startsAt).toISOString()}::timestamptz,
              ${new Date(endsAt).toISOString()}::timestamptz)
            RETURNING ${sql.literal(DELEGATION_COLUMNS)}
          `)
          })).pipe(Effect.catchTag("SqlError", Effect.die))
          return yield* namedOne(orgId, row)
        }
      )

      const listDelegations = Effect.fn("Delegations.list")(function*(orgId: string) {
        const rows = yield* DelegationRows.all(sql`
          SELECT ${sql.literal(DELEGATION_COLUMNS)} FROM reviewer_delegations
          WHERE org_id = ${orgId} AND ended_at IS NULL AND ends_at > now() ORDER BY starts_at, id
        `)
        return yield* named(orgId, rows)
      })

      const endDelegation = Effect.fn("Delegations.end")(
        function*(orgId: string, actor: string, delegationId: string) {
          const [ended] = yield* DelegationRows.all(sql`
          UPDATE reviewer_delegations SET ended_at = now()
          WHERE id = ${delegationId} AND org_id = ${orgId} AND delegator = ${actor} AND ended_at IS NULL AND ends_at > now()
          RETURNING ${sql.literal(DELEGATION_COLUMNS)}
        `)
          if (ended !== undefined) return yield* namedOne(orgId, ended)
          const row = yield* DelegationRows.one(sql`
          SELECT ${sql.literal(DELEGATION_COLUMNS)} FROM reviewer_delegations
          WHERE id = ${delegationId} AND org_id = ${orgId} AND delegator = ${actor}
        `)
          if (row === undefined) return yield* new NotFound({ detail: "No such delegation of the caller." })
          return yield* namedOne(orgId, row)
        }
      )

      return Delegations.of({ delegate, list: listDelegations, end: endDelegation })
    })
  )
}
