/**
 * The settle statement's input as JSON text: the same rows the statement
 * read when each was a full object, a null field left out (it reads as
 * NULL in `jsonb_to_recordset`), and any text escaped.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration } from "effect"
import { type Claimed, Outcome, type SettleItem } from "../../../src/deliveries/DeliveryQueue.ts"
import { settleRowsJson } from "../../../src/deliveries/rows/SettleInput.ts"

const claimed = (id: string) =>
  ({
    id,
    orgId: "org",
    targetId: "00000000-0000-0000-0000-00000000000t",
    leaseOwner: "00000000-0000-0000-0000-0000000000aa"
  }) as Claimed

/** What the statement reads of a row: every column, missing ones as null. */
const columns = [
  "ord",
  "id",
  "lease_owner",
  "target_id",
  "status",
  "last_error",
  "meta",
  "retry_after_ms",
  "finished",
  "failed_attempt",
  "cooldown_after",
  "cooldown_base",
  "cooldown_cap",
  "status_code",
  "error",
  "snippet",
  "duration_ms"
] as const
const read = (json: string) =>
  (JSON.parse(json) as Array<Record<string, unknown>>).map((row) => {
    for (const key of Object.keys(row)) assert.include(columns, key)
    return Object.fromEntries(columns.map((column) => [column, row[column] ?? null]))
  })

describe("the settle rows", () => {
  it("a batch of every outcome reads as the statement's columns, in order", () => {
    const cooldown = { after: 5, base: Duration.seconds(30), cap: "1 hour" as const }
    const items: Array<SettleItem> = [
      {
        claimed: claimed("d1"),
        outcome: Outcome.delivered(),
        attempt: { statusCode: 204, responseSnippet: "", durationMs: 3.6 },
        cooldown
      },
      {
        claimed: claimed("d2"),
        outcome: Outcome.retry(Duration.millis(1500), "HTTP 503"),
        attempt: { statusCode: 503, error: "HTTP 503", responseSnippet: "busy \"now\"\n\u2028é", durationMs: 12 }
      },
      {
        claimed: claimed("d3"),
        outcome: Outcome.failed("endpoint deleted"),
        attempt: { error: "endpoint deleted", durationMs: -1 }
      },
      {
        claimed: claimed("d4"),
        outcome: Outcome.partial("2 of 3 rejected", { rejected: 2 }),
        attempt: { durationMs: 0 }
      }
    ]
    assert.deepStrictEqual(read(settleRowsJson(items)), [
      {
        ord: 0,
        id: "d1",
        lease_owner: "00000000-0000-0000-0000-0000000000aa",
        target_id: "00000000-0000-0000-0000-00000000000t",
        status: "delivered",
        last_error: null,
        meta: null,
        retry_after_ms: null,
        finished: true,
        failed_attempt: false,
        cooldown_after: 5,
        cooldown_base: 30,
        cooldown_cap: 3600,
        status_code: 204,
        error: null,
        snippet: "",
        duration_ms: 4
      },
      {
        ord: 1,
        id: "d2",
        lease_owner: "00000000-0000-0000-0000-0000000000aa",
        target_id: "00000000-0000-0000-0000-00000000000t",
        status: "retrying",
        last_error: "HTTP 503",
        meta: null,
        retry_after_ms: 1500,
        finished: false,
        failed_attempt: true,
        cooldown_after: null,
        cooldown_base: null,
        cooldown_cap: null,
        status_code: 503,
        error: "HTTP 503",
        snippet: "busy \"now\"\n\u2028é",
        duration_ms: 12
      },
      {
        ord: 2,
        id: "d3",
        lease_owner: "00000000-0000-0000-0000-0000000000aa",
        target_id: "00000000-0000-0000-0000-00000000000t",
        status: "failed",
        last_error: "endpoint deleted",
        meta: null,
        retry_after_ms: null,
        finished: true,
        failed_attempt: true,
        cooldown_after: null,
        cooldown_base: null,
        cooldown_cap: null,
        status_code: null,
        error: "endpoint deleted",
        snippet: null,
        duration_ms: 0
      },
      {
        ord: 3,
        id: "d4",
        lease_owner: "00000000-0000-0000-0000-0000000000aa",
        target_id: "00000000-0000-0000-0000-00000000000t",
        status: "partial",
        last_error: "2 of 3 rejected",
        meta: { rejected: 2 },
        retry_after_ms: null,
        finished: true,
        failed_attempt: false,
        cooldown_after: null,
        cooldown_base: null,
        cooldown_cap: null,
        status_code: null,
        error: null,
        snippet: null,
        duration_ms: 0
      }
    ])
  })

  it("an empty batch is an empty array", () => {
    assert.deepStrictEqual(JSON.parse(settleRowsJson([])), [])
  })
})
