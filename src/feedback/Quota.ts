/**
 * The organization's feedback quota (`SVC_MAX_FEEDBACK_BYTES_PER_ORG`):
 * what one record counts, the organization's usage as read or as hinted
 * (`UsageHint.ts`), and the problem that refuses a record. The INSERT
 * checks and counts the bytes itself (`InsertStatement.ts`, migration
 * 0631); what is here refuses early and says why a row was kept out.
 */
import { Clock, Effect, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { LimitReached } from "../api/Errors.ts"
import type { SvcConfigShape } from "../platform/Config.ts"
import { BigIntText, rowsOf } from "../platform/Rows.ts"
import { UsageHints } from "./UsageHint.ts"

/** What one feedback record counts against `SVC_MAX_FEEDBACK_BYTES_PER_ORG`: the record, and its correction's JSON. */
export const FEEDBACK_RECORD_BYTES = 256
/** How long this process weighs the feedback quota on the usage it last read (`UsageHint.ts`). */
const USAGE_HINT_MS = 2_000
export const feedbackBytes = (text: string | null) => FEEDBACK_RECORD_BYTES + (text === null ? 0 : Buffer.byteLength(text, "utf8"))
/** The usage row a submission adds to (migration 0631): spread so one organization's writers seldom wait on one row. */
export const usageShard = () => Math.floor(Math.random() * 16)

const UsageRows = rowsOf("org_feedback_usage", Schema.Struct({ bytes: BigIntText }))

export const makeQuota = (sql: SqlClient.SqlClient, config: SvcConfigShape) => {
  /** The quota's problem when `bytes` more would pass it. */
  const overQuota = (used: number, bytes: number) =>
    used + bytes > config.maxFeedbackBytesPerOrg
      ? Effect.fail(new LimitReached({
        limit: "SVC_MAX_FEEDBACK_BYTES_PER_ORG",
        limit_value: config.maxFeedbackBytesPerOrg,
        detail: `The organization's feedback holds ${used} bytes; this one (${bytes} bytes) would pass the ${config.maxFeedbackBytesPerOrg} allowed (SVC_MAX_FEEDBACK_BYTES_PER_ORG).`
      }))
      : Effect.void
  const hints = new UsageHints(USAGE_HINT_MS)
  /** The organization's usage as read now (and remembered as a hint). */
  const readUsage = (orgId: string) =>
    Effect.flatMap(
      UsageRows.one(sql`SELECT (SELECT coalesce(sum(bytes), 0) FROM org_feedback_usage WHERE org_id = ${orgId}) AS bytes`),
      (row) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const bytes = Number(row?.bytes ?? 0)
          hints.read(orgId, bytes, now)
          return bytes
        })
    )
  /** Fails with the quota's problem when, read now, `bytes` more would pass it. */
  const check = (orgId: string, bytes: number) => Effect.flatMap(readUsage(orgId), (fresh) => overQuota(fresh, bytes))
  /**
   * Refused only on a fresh read: a hint that says `bytes` more would
   * pass the quota is read again first.
   */
  const weigh = (orgId: string, used: number, bytes: number) =>
    used + bytes <= config.maxFeedbackBytesPerOrg ? Effect.void : check(orgId, bytes)
  /** The organization's stored bytes (hinted or read); fails when even a bare score would pass the quota. */
  const usage = (orgId: string) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const hinted = hints.get(orgId, now)
      const used = hinted === undefined ? readUsage(orgId) : Effect.succeed(hinted)
      return Effect.tap(used, (bytes) => weigh(orgId, bytes, FEEDBACK_RECORD_BYTES))
    })
  return {
    usage,
    weigh,
    check,
    /** This process stored `bytes` more for `orgId`. */
    stored: (orgId: string, bytes: number) => hints.stored(orgId, bytes)
  }
}
