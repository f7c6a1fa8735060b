/**
 * The organization's feedback quota (`SVC_MAX_FEEDBACK_BYTES_PER_ORG`):
 * what one record counts, the organization's usage as read or as hinted
 * (`UsageHint.ts`), and the problem that refuses a record. The INSERT
 * checks and counts the bytes itself (`InsertStatement.ts`, migration
 * 0631); what is here refuses early and says why a row was kept out.
 */
import { Clock, Effect } from "effect"
import type { SqlClient } from "effect/sql"
import type { SvcConfigShape } from "../platform/Config.ts"
import { type ByteQuota, overQuota, readUsage as readOrgUsage } from "../platform/OrgLimits.ts"
import { UsageHints } from "./UsageHint.ts"

/** What one feedback record counts against `SVC_MAX_FEEDBACK_BYTES_PER_ORG`: the record, and its correction's JSON. */
export const FEEDBACK_RECORD_BYTES = 256
/** How long this process weighs the feedback quota on the usage it last read (`UsageHint.ts`). */
const USAGE_HINT_MS = 2_000
export const feedbackBytes = (text: string | null) =>
  FEEDBACK_RECORD_BYTES + (text === null ? 0 : Buffer.byteLength(text, "utf8"))

export const makeQuota = (sql: SqlClient.SqlClient, config: SvcConfigShape) => {
  /** The feedback quota (`org_usage` of kind `feedback`). */
  const quota: ByteQuota = {
    kind: "feedback",
    limit: "SVC_MAX_FEEDBACK_BYTES_PER_ORG",
    value: config.maxFeedbackBytesPerOrg,
    what: "feedback"
  }
  const hints = new UsageHints(USAGE_HINT_MS)
  /** The organization's usage as read now (and remembered as a hint). */
  const readUsage = (orgId: string) =>
    Effect.tap(
      readOrgUsage(sql, orgId, quota),
      (bytes) => Effect.map(Clock.currentTimeMillis, (now) => hints.read(orgId, bytes, now))
    )
  /** Fails with the quota's problem when, read now, `bytes` more would pass it. */
  const check = (orgId: string, bytes: number) =>
    Effect.flatMap(readUsage(orgId), (fresh) => overQuota(quota, fresh, bytes))
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
    stored: (orgId: string, bytes: number) => hints.stored(orgId, bytes)
  }
}
