/**
 * Who may decide (docs/approvals.md, "Who counts as whom"). Members and
 * delegates are stored as records name deciders (`decided_by`): an API
 * key's id or `console:<person>`, so "may this decider decide" is one
 * lookup of the decider's own name; whom their vote counts for is
 * `standing`'s answer. A key named as a reviewer must be fit to decide.
 */
import { Effect, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import type { Reviewer } from "../api/Deciders.ts"
import { rowsOf } from "../platform/Rows.ts"

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

const KeyRows = rowsOf("api_keys", Schema.Struct({ id: Schema.String }))

/** The first of `reviewers` that is a key but not an active key of the organization holding `approvals.decide`. */
export const firstUnfitKey = Effect.fnUntraced(function*(
  sql: SqlClient.SqlClient,
  orgId: string,
  reviewers: ReadonlyArray<Reviewer>
) {
  const keys = reviewers.flatMap((reviewer, i) => reviewer.key_id !== undefined ? [{ i, id: reviewer.key_id }] : [])
  if (keys.length === 0) return undefined
  const fit = yield* KeyRows.all(sql`
    SELECT id FROM api_keys WHERE org_id = ${orgId} AND id IN ${sql.in(keys.map((key) => key.id))}
      AND revoked_at IS NULL AND 'approvals.decide' = ANY (scopes)
  `)
  const known = new Set(fit.map((row) => row.id))
  return keys.find((key) => !known.has(key.id))
})
