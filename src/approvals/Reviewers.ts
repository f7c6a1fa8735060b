/**
 * Reviewer groups (docs/approvals.md, "Reviewer groups"): an organization's
 * named groups of people who decide the approvals assigned to them, the
 * groups a policy names, and a person's own reviewer address
 * (`MemberAddresses.ts`). Delegations are `Delegations.ts`'s; who may
 * decide an approval, and for whom, is `Deciders.ts`'s.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { deciderOf, reviewerOf } from "../api/Deciders.ts"
import { type LimitReached, NotFound, type RateLimited } from "../api/Errors.ts"
import type { PolicyInput } from "../api/Policies.ts"
import type { OwnReviewerAddress } from "../api/ReviewerAddresses.ts"
import { type GroupInput, GroupInUse, type ReviewerGroup } from "../api/Reviewers.ts"
import { DeliveryQueue } from "../deliveries/DeliveryQueue.ts"
import { SvcConfig } from "../platform/Config.ts"
import { newId } from "../platform/Ids.ts"
import { refuseAtCap } from "../platform/OrgLimits.ts"
import { JsonColumn, rowsOf, Timestamp } from "../platform/Rows.ts"
import { firstUnfitKey } from "./Deciders.ts"
import { addressStatus, inviteMemberAddresses, readOwnAddress, setOwnAddress } from "./MemberAddresses.ts"

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

      const lockGroup = (orgId: string, name: string) =>
        IdRows.one(sql`SELECT id FROM reviewer_groups WHERE org_id = ${orgId} AND name = ${name} FOR UPDATE`)

      const readGroup = (orgId: string, name: string) =>
        GroupRows.one(
          sql`SELECT ${
            sql.literal(GROUP_COLUMNS)
          } FROM reviewer_groups g WHERE g.org_id = ${orgId} AND g.name = ${name}`
        )

      const putGroup = Effect.fn("Reviewers.putGroup")(function*(orgId: string, name: string, input: GroupInput) {
        const unfit = yield* firstUnfitKey(sql, orgId, input.members)
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
        ownAddress,
        setOwnAddress: setOwn
      })
    })
  )
}
