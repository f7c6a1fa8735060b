/**
 * What a person needs to decide an approval, beyond the approval itself:
 * the name of the session's task, the session's earlier steps, and the
 * history of closed approvals (who decided, when and why). The console's
 * approvals screen and the page of a reviewer mail's link read it.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import type { ApprovalContext, ApprovalHistoryItem, EarlierStep } from "../api/Approvals.ts"
import { MAX_EARLIER_STEPS } from "../api/Approvals.ts"
import { InvalidRequest, NotFound } from "../api/Errors.ts"
import { SecretBox } from "../platform/Crypto.ts"
import { type CursorMac, keysetPage, type PageRequest } from "../platform/Cursor.ts"
import { rowsOf, Timestamp } from "../platform/Rows.ts"
import { iso } from "../platform/Time.ts"
import { LIST_COLUMNS, LIST_FROM, ListColumns, listItemOf } from "./OrgStream.ts"

/** An approval with its step (the list's columns) and its task's name. */
const ItemRows = rowsOf("approvals", Schema.Struct({ ...ListColumns.fields, task_name: Schema.NullOr(Schema.String) }))

const StepRows = rowsOf(
  "agent_steps",
  Schema.Struct({
    step_id: Schema.String,
    tool: Schema.String,
    action_class: Schema.String,
    resolution: Schema.Literals(["allow", "reject", "pending"]),
    rule: Schema.NullOr(Schema.String),
    outcome: Schema.NullOr(Schema.Literals(["succeeded", "failed"])),
    created_at: Timestamp,
    total: Schema.Number
  })
)

/** The list's columns and the task's name (the task of the same organization only). */
const ITEM_COLUMNS = `${LIST_COLUMNS}, t.name AS task_name`
const ITEM_FROM = `${LIST_FROM} LEFT JOIN tasks t ON t.id = a.task_id AND t.org_id = a.org_id`

export class ApprovalContexts extends Context.Service<ApprovalContexts, {
  /** The approval, its task's name and the session's steps before its step. */
  readonly context: (orgId: string, approvalId: string) => Effect.Effect<ApprovalContext, NotFound>
  /** Closed approvals, the latest request first. */
  readonly history: (orgId: string, options: PageRequest) => Effect.Effect<
    { readonly approvals: ReadonlyArray<ApprovalHistoryItem>; readonly next_cursor: string | null },
    InvalidRequest
  >
}>()("svc/approvals/ApprovalContexts") {
  static readonly layer = Layer.effect(
    ApprovalContexts,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const box = yield* SecretBox
      const mac: CursorMac = (message) => box.mac("cursor", message)

      const context = Effect.fn("ApprovalContexts.context")(function*(orgId: string, approvalId: string) {
        yield* Effect.annotateCurrentSpan({ "svc.approval_id": approvalId })
        const row = yield* ItemRows.one(sql`
          SELECT ${sql.literal(ITEM_COLUMNS)} FROM ${
          sql.literal(ITEM_FROM)
        } WHERE a.id = ${approvalId} AND a.org_id = ${orgId}
        `)
        if (row === undefined) return yield* new NotFound({ detail: "No such approval." })
        // The latest steps before this one (a session's steps are numbered
        // in the order they were asked), then oldest first for reading.
        const steps = yield* StepRows.all(sql`
          SELECT step_id, tool, action_class, resolution, rule, outcome, created_at, total FROM (
            SELECT s.seq, s.step_id, s.tool, s.action_class, s.resolution, s.rule, s.outcome, s.created_at,
              count(*) OVER ()::int AS total
            FROM agent_steps s
            WHERE s.session_id = ${row.session_id}
              AND s.seq < (SELECT seq FROM agent_steps WHERE session_id = ${row.session_id} AND step_id = ${row.step_id})
            ORDER BY s.seq DESC
          ) earlier
          ORDER BY seq DESC LIMIT ${MAX_EARLIER_STEPS}
        `)
        const earlier: Array<EarlierStep> = steps.toReversed().map((step) => ({
          step_id: step.step_id,
          tool: step.tool,
          action_class: step.action_class,
          resolution: step.resolution,
          ...(step.rule === null ? {} : { rule: step.rule }),
          ...(step.outcome === null ? {} : { outcome: step.outcome }),
          created_at: iso(step.created_at)
        }))
        return {
          approval: listItemOf(row),
          task_name: row.task_name,
          earlier_steps: earlier,
          earlier_steps_total: steps[0]?.total ?? 0
        }
      })

      const history = Effect.fn("ApprovalContexts.history")(function*(orgId: string, options: PageRequest) {
        const { items, next_cursor } = yield* keysetPage(
          mac,
          { orgId, list: "approval-history" },
          options,
          (bound, rows) =>
            ItemRows.all(sql`
            SELECT ${sql.literal(ITEM_COLUMNS)} FROM ${sql.literal(ITEM_FROM)}
            WHERE a.org_id = ${orgId} AND a.status IN ('approved', 'rejected', 'expired')
              ${Option.match(bound, { onNone: () => sql``, onSome: (seq) => sql`AND a.seq < ${seq}` })}
            ORDER BY a.seq DESC LIMIT ${rows}
          `)
        )
        return {
          approvals: items.map((row) => ({ ...listItemOf(row), task_name: row.task_name })),
          next_cursor
        }
      })

      return ApprovalContexts.of({ context, history })
    })
  )
}
