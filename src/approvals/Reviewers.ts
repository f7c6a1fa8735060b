/**
 * Named reviewers (docs/approvals.md, "Reviewer groups"): an organization's
 * reviewer groups, the delegations of a member's reviewing to another person
 * for a time window, and who may decide an approval assigned to a group.
 *
 * Members and delegates are stored as records name deciders (`decided_by`):
 * an API key's id or `console:<person>`, so "may this decider decide" is one
 * lookup of the decider's own name; whom their vote counts for is
 * `standing`'s answer (docs/approvals.md, "Who counts as whom").
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { deciderOf, type Reviewer, reviewerOf } from "../api/Deciders.ts"
import { type Delegation, type DelegationInput, MAX_DELEGATION_DAYS } from "../api/Delegations.ts"
import { InvalidRequest, type LimitReached, NotFound, type RateLimited } from "../api/Errors.ts"
import type { PolicyInput } from "../api/Policies.ts"
import type { OwnReviewerAddress } from "../api/ReviewerAddresses.ts"
import { type GroupInput, GroupInUse, type ReviewerGroup } from "../api/Reviewers.ts"
import { DeliveryQueue } from "../deliveries/DeliveryQueue.ts"
import { SvcConfig } from "../platform/Config.ts"
import { newId } from "../platform/Ids.ts"
import { refuseAtCap } from "../platform/OrgLimits.ts"
import { JsonColumn, rowsOf, Timestamp, TimestampOrNull } from "../platform/Rows.ts"
import { databaseNow } from "../platform/Time.ts"
import { addressStatus, inviteMemberAddresses, readOwnAddress, setOwnAddress } from "./MemberAddresses.ts"

/**
 * SQL: whether `actor` may decide an approval assigned to the group named
 * by `group` (a value or a column): a member of it, or the delegate of a
 * member whose delegation is in force now (the database's clock).
 */
export const reviews = (sql: SqlClient.SqlClient, orgId: string, actor: string, group: unknown) =>
  sql`EXISTS (
    SELECT 1 FROM reviewer_groups g JOIN reviewer_group_members m ON m.group_id = g.id
    WHERE g.org_id = ${orgId} AND g.name = ${group} AND (m.member = ${actor} OR m.member IN (
      SELECT d.delegator FROM reviewer_delegations d
      WHERE d.org_id = ${orgId} AND d.delegate = ${actor} AND d.ended_at IS NULL AND d.starts_at <= now() AND d.ends_at > now())))`

const StandingRows = rowsOf(
  "reviewer_groups",
  Schema.Struct({
    person: Schema.NullOr(Schema.String),
    decided_for: Schema.NullOr(Schema.String)
  })
)

/**
 * Who `actor` is on approval `approvalId` (run it in the decision's
 * transaction, under the approval's row lock): `person`, the person they
 * are (`svc_person`: a key's person, a console person, or the shared
 * reviewer address as `email:<address>`; null for a key revoked meanwhile,
 * checked in the database whatever the key cache of a process holds), and
 * `decidedFor`, the person their vote counts for: themselves on an
 * approval assigned to nobody or to a group they are in; otherwise the
 * member of the group who delegated to them for now (the first in name
 * order whose person has not voted yet, so two members' delegate may cast
 * one vote, which counts for one of them); null when they may not decide it.
 */
export const standing = (
  sql: SqlClient.SqlClient,
  orgId: string,
  actor: string,
  approvalId: string,
  group: string | null
) =>
  Effect.map(
    StandingRows.returned(sql`
      SELECT p.person, CASE
        WHEN p.person IS NULL THEN NULL
        WHEN ${group}::text IS NULL OR EXISTS (
          SELECT 1 FROM reviewer_groups g JOIN reviewer_group_members m ON m.group_id = g.id
          WHERE g.org_id = ${orgId} AND g.name = ${group} AND m.member = ${actor}) THEN p.person
        ELSE (
          SELECT svc_person(${orgId}, d.delegator) AS stood_for
          FROM reviewer_delegations d
          JOIN reviewer_group_members m ON m.member = d.delegator
          JOIN reviewer_groups g ON g.id = m.group_id AND g.org_id = ${orgId} AND g.name = ${group}
          WHERE d.org_id = ${orgId} AND d.delegate = ${actor} AND d.ended_at IS NULL AND d.starts_at <= now() AND d.ends_at > now()
            AND svc_person(${orgId}, d.delegator) IS NOT NULL
          ORDER BY EXISTS (SELECT 1 FROM approval_votes v WHERE v.approval_id = ${approvalId} AND v.decided_for = svc_person(${orgId}, d.delegator)),
            d.delegator
          LIMIT 1)
      END AS decided_for
      FROM (SELECT svc_person(${orgId}, ${actor}) AS person) p
    `),
    (row) => ({ person: row.person, decidedFor: row.decided_for })
  )

/** The groups of an escalation chain, each named by its index (`escalation_chain[1]`). */
const chainNamed = (field: string, chain: ReadonlyArray<string> | undefined) =>
  (chain ?? []).map((name, i) => ({ field: `${field}[${i}]`, name }))

/** The groups a policy names, each with the field that names it. */
const groupsNamed = (input: PolicyInput): ReadonlyArray<{ readonly field: string; readonly name: string }> => [
  ...(input.group === undefined ? [] : [{ field: "group", name: input.group }]),
  ...chainNamed("escalation_chain", input.escalation_chain),
  ...(input.rules ?? []).flatMap((rule, i) =>
    rule.result.decision !== "require_approval" ? [] : [
      ...(rule.result.group === undefined ? [] : [{ field: `rules[${i}].result.group`, name: rule.result.group }]),
      ...chainNamed(`rules[${i}].result.escalation_chain`, rule.result.escalation_chain)
    ]
  )
]

const NameRows = rowsOf("reviewer_groups", Schema.Struct({ name: Schema.String }))

/**
 * Every group a policy names exists, or the 404 naming the first field that
 * names one that does not (as an absent task is for a session). Run in the
 * policy's transaction: the rows are held `FOR SHARE` until it commits, so
 * a group's delete (which locks its row, then looks for policies naming it)
 * either waits and finds the policy, or has deleted the row first and this
 * finds it absent.
 */
export const checkGroups = Effect.fnUntraced(function*(sql: SqlClient.SqlClient, orgId: string, input: PolicyInput) {
  const named = groupsNamed(input)
  if (named.length === 0) return
  const found = yield* NameRows.all(sql`
    SELECT name FROM reviewer_groups WHERE org_id = ${orgId} AND name IN ${
    sql.in(named.map((group) => group.name))
  } FOR SHARE
  `)
  const known = new Set(found.map((row) => row.name))
  const missing = named.find((group) => !known.has(group.name))
  if (missing !== undefined) {
    return yield* new NotFound({
      detail: `No reviewer group is named ${JSON.stringify(missing.name)} (${missing.field}).`
    })
  }
})

const GroupRow = Schema.Struct({
  name: Schema.String,
  members: JsonColumn(Schema.Array(Schema.Struct({
    member: Schema.String,
    email: Schema.NullOr(Schema.String),
    confirmed: Schema.Boolean,
    accepted: Schema.Boolean
  }))),
  created_at: Timestamp,
  updated_at: Timestamp
})
const GroupRows = rowsOf("reviewer_groups", GroupRow)

/** Each member with their own address (one per person in the organization, whichever group set it). */
const GROUP_COLUMNS = `g.name, (SELECT coalesce(jsonb_agg(jsonb_build_object('member', m.member, 'email', a.email,
    'confirmed', a.confirmed_at IS NOT NULL, 'accepted', a.accepted_at IS NOT NULL) ORDER BY m.member), '[]'::jsonb)
  FROM reviewer_group_members m LEFT JOIN reviewer_member_addresses a ON a.org_id = g.org_id AND a.member = m.member
  WHERE m.group_id = g.id) AS members, g.created_at, g.updated_at`

const toGroup = (row: typeof GroupRow.Type): ReviewerGroup => ({
  ...row,
  members: row.members.map((m) => ({
    ...reviewerOf(m.member),
    email: m.email,
    email_status: m.email === null ? null : addressStatus(m.accepted, m.confirmed)
  }))
})

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

const toDelegation = (row: typeof DelegationRow.Type): Delegation => ({
  delegation_id: row.id,
  delegator: reviewerOf(row.delegator),
  delegate: reviewerOf(row.delegate),
  starts_at: row.starts_at,
  ends_at: row.ends_at,
  ended_at: row.ended_at
})

const KeyRows = rowsOf("api_keys", Schema.Struct({ id: Schema.String }))
const IdRows = rowsOf("reviewer_groups", Schema.Struct({ id: Schema.String }))

export class Reviewers extends Context.Service<Reviewers, {
  readonly putGroup: (
    orgId: string,
    name: string,
    input: GroupInput
  ) => Effect.Effect<ReviewerGroup, NotFound | LimitReached>
  readonly listGroups: (orgId: string) => Effect.Effect<ReadonlyArray<ReviewerGroup>>
  readonly getGroup: (orgId: string, name: string) => Effect.Effect<ReviewerGroup, NotFound>
  readonly deleteGroup: (orgId: string, name: string) => Effect.Effect<void, NotFound | GroupInUse>
  readonly delegate: (
    orgId: string,
    actor: string,
    input: DelegationInput
  ) => Effect.Effect<Delegation, InvalidRequest | NotFound | LimitReached>
  readonly listDelegations: (orgId: string) => Effect.Effect<ReadonlyArray<Delegation>>
  readonly endDelegation: (orgId: string, actor: string, delegationId: string) => Effect.Effect<Delegation, NotFound>
  /** The caller's own reviewer address (`MemberAddresses.ts`). */
  readonly ownAddress: (orgId: string, actor: string) => Effect.Effect<OwnReviewerAddress>
  /** The caller sets their own reviewer address, or accepts the one they were invited to (the same address). */
  readonly setOwnAddress: (
    orgId: string,
    actor: string,
    email: string | null
  ) => Effect.Effect<OwnReviewerAddress, RateLimited>
}>()("svc/approvals/Reviewers") {
  static readonly layer = Layer.effect(
    Reviewers,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const config = yield* SvcConfig
      const queue = yield* DeliveryQueue

      /** The first of `reviewers` that is a key but not an active key of the organization holding `approvals.decide`. */
      const firstUnfitKey = Effect.fnUntraced(function*(orgId: string, reviewers: ReadonlyArray<Reviewer>) {
        const keys = reviewers.flatMap((reviewer, i) =>
          reviewer.key_id !== undefined ? [{ i, id: reviewer.key_id }] : []
        )
        if (keys.length === 0) return undefined
        const fit = yield* KeyRows.all(sql`
          SELECT id FROM api_keys WHERE org_id = ${orgId} AND id IN ${sql.in(keys.map((key) => key.id))}
            AND revoked_at IS NULL AND 'approvals.decide' = ANY (scopes)
        `)
        const known = new Set(fit.map((row) => row.id))
        return keys.find((key) => !known.has(key.id))
      })

      const lockGroup = (orgId: string, name: string) =>
        IdRows.one(sql`SELECT id FROM reviewer_groups WHERE org_id = ${orgId} AND name = ${name} FOR UPDATE`)

      const readGroup = (orgId: string, name: string) =>
        GroupRows.one(
          sql`SELECT ${
            sql.literal(GROUP_COLUMNS)
          } FROM reviewer_groups g WHERE g.org_id = ${orgId} AND g.name = ${name}`
        )

      const putGroup = Effect.fn("Reviewers.putGroup")(function*(orgId: string, name: string, input: GroupInput) {
        const unfit = yield* firstUnfitKey(orgId, input.members)
        if (unfit !== undefined) {
          return yield* new NotFound({
            detail:
              `No active API key of the organization holding approvals.decide has the id members[${unfit.i}].key_id names.`
          })
        }
        yield* sql.withTransaction(Effect.gen(function*() {
          const existing = yield* lockGroup(orgId, name)
          let groupId = existing?.id
          if (groupId === undefined) {
            const max = config.reviewerLimits.groups
            yield* refuseAtCap(sql, orgId, "reviewer_groups", {
              value: max,
              limit: "SVC_MAX_REVIEWER_GROUPS_PER_ORG",
              detail:
                `The organization already has ${max} reviewer groups, the most allowed (SVC_MAX_REVIEWER_GROUPS_PER_ORG).`
            })
            groupId = newId()
            yield* sql`INSERT INTO reviewer_groups (id, org_id, name) VALUES (${groupId}, ${orgId}, ${name})`
          } else {
            yield* sql`UPDATE reviewer_groups SET updated_at = now() WHERE id = ${groupId}`
            yield* sql`DELETE FROM reviewer_group_members WHERE group_id = ${groupId}`
          }
          const id = groupId
          yield* Effect.forEach(
            input.members,
            (member) => sql`INSERT INTO reviewer_group_members (group_id, member) VALUES (${id}, ${deciderOf(member)})`,
            { discard: true }
          )
          // Addresses an administrator gives are invitations: the member accepts (`setOwnAddress`).
          yield* inviteMemberAddresses(sql, orgId, input.members)
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        return toGroup((yield* readGroup(orgId, name))!)
      })

      const listGroups = Effect.fn("Reviewers.listGroups")(function*(orgId: string) {
        const rows = yield* GroupRows.all(sql`
          SELECT ${sql.literal(GROUP_COLUMNS)} FROM reviewer_groups g WHERE g.org_id = ${orgId} ORDER BY g.name
        `)
        return rows.map(toGroup)
      })

      const getGroup = Effect.fn("Reviewers.getGroup")(function*(orgId: string, name: string) {
        const row = yield* readGroup(orgId, name)
        if (row === undefined) return yield* new NotFound({ detail: "No such reviewer group." })
        return toGroup(row)
      })

      const deleteGroup = Effect.fn("Reviewers.deleteGroup")(function*(orgId: string, name: string) {
        const outcome = yield* sql.withTransaction(Effect.gen(function*() {
          const group = yield* lockGroup(orgId, name)
          if (group === undefined) return "missing" as const
          const [used] = yield* sql`
            SELECT 1 FROM approval_policies p WHERE p.org_id = ${orgId} AND (p.reviewer_group = ${name} OR ${name} = ANY(p.escalation_chain)
              OR EXISTS (SELECT 1 FROM jsonb_array_elements(p.rules) r
                WHERE r->'result'->>'group' = ${name} OR r->'result'->'escalation_chain' @> jsonb_build_array(${name}::text)))
            UNION ALL
            SELECT 1 FROM approvals a WHERE a.org_id = ${orgId} AND a.status = 'pending'
              AND (a.assigned_group = ${name} OR ${name} = ANY(a.escalation_chain))
            LIMIT 1
          `
          if (used !== undefined) return "used" as const
          yield* sql`DELETE FROM reviewer_groups WHERE id = ${group.id}`
          return "deleted" as const
        })).pipe(Effect.orDie)
        if (outcome === "missing") return yield* new NotFound({ detail: "No such reviewer group." })
        if (outcome === "used") {
          return yield* new GroupInUse({
            detail: "A policy names this group, or a pending approval is assigned to it: change those first."
          })
        }
      })

      const delegate = Effect.fn("Reviewers.delegate")(function*(orgId: string, actor: string, input: DelegationInput) {
        const delegate = deciderOf(input.delegate)
        if (delegate === actor) {
          return yield* new InvalidRequest({ field: "delegate", detail: "A person cannot delegate to themselves." })
        }
        if ((yield* firstUnfitKey(orgId, [input.delegate])) !== undefined) {
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
            detail: `ends_at must be in the future, after starts_at, and at most ${MAX_DELEGATION_DAYS} days after it.`
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
        return toDelegation(row)
      })

      const listDelegations = Effect.fn("Reviewers.listDelegations")(function*(orgId: string) {
        const rows = yield* DelegationRows.all(sql`
          SELECT ${sql.literal(DELEGATION_COLUMNS)} FROM reviewer_delegations
          WHERE org_id = ${orgId} AND ended_at IS NULL AND ends_at > now() ORDER BY starts_at, id
        `)
        return rows.map(toDelegation)
      })

      const endDelegation = Effect.fn("Reviewers.endDelegation")(
        function*(orgId: string, actor: string, delegationId: string) {
          const [ended] = yield* DelegationRows.all(sql`
          UPDATE reviewer_delegations SET ended_at = now()
          WHERE id = ${delegationId} AND org_id = ${orgId} AND delegator = ${actor} AND ended_at IS NULL AND ends_at > now()
          RETURNING ${sql.literal(DELEGATION_COLUMNS)}
        `)
          if (ended !== undefined) return toDelegation(ended)
          const row = yield* DelegationRows.one(sql`
          SELECT ${sql.literal(DELEGATION_COLUMNS)} FROM reviewer_delegations
          WHERE id = ${delegationId} AND org_id = ${orgId} AND delegator = ${actor}
        `)
          if (row === undefined) return yield* new NotFound({ detail: "No such delegation of the caller." })
          return toDelegation(row)
        }
      )

      const ownAddress = Effect.fn("Reviewers.ownAddress")(function*(orgId: string, actor: string) {
        return { ...reviewerOf(actor), ...(yield* readOwnAddress(sql, orgId, actor)) }
      })

      const setOwn = Effect.fn("Reviewers.setOwnAddress")(
        function*(orgId: string, actor: string, email: string | null) {
          const mailed = yield* sql.withTransaction(setOwnAddress(sql, queue, config, orgId, actor, email)).pipe(
            Effect.catchTag("SqlError", Effect.die)
          )
          if (mailed) yield* queue.wake("email")
          return yield* ownAddress(orgId, actor)
        }
      )

      return Reviewers.of({
        putGroup,
        listGroups,
        getGroup,
        deleteGroup,
        delegate,
        listDelegations,
        endDelegation,
        ownAddress,
        setOwnAddress: setOwn
      })
    })
  )
}
