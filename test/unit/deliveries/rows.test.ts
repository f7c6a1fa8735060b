/**
 * The queue's rows are decoded by schemas: a row of the wrong shape is a
 * defect naming its table, never a value silently wrong further on, while a
 * database failure stays an error the worker can act on.
 */
import type { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Option } from "effect"
import { ConnectionError, SqlError } from "effect/sql/SqlError"
import * as Listing from "../../../src/deliveries/records/Listing.ts"
import * as Rows from "../../../src/deliveries/Rows.ts"
import { RowDecodeError } from "../../../src/platform/Rows.ts"

const row = {
  id: "00000000-0000-4000-8000-000000000001",
  seq: "7",
  org_id: "00000000-0000-4000-8000-000000000002",
  kind: "webhook",
  target_id: "00000000-0000-4000-8000-000000000003",
  status: "failed",
  label: "approval.requested",
  event_id: null,
  payload: null,
  meta: {},
  attempts: 3,
  replays: 0,
  last_error: "HTTP 500",
  next_attempt_at: new Date("2026-01-01T00:00:00Z"),
  created_at: "2026-01-01T00:00:00Z",
  finished_at: null
}

/** A client whose every statement answers `rows`: enough for the statements' functions, which only build and run one. */
const answering = (rows: ReadonlyArray<unknown>) =>
  Object.assign(() => Effect.succeed(rows), { literal: (text: string) => text }) as unknown as PgClient.PgClient

const decodeDefect = (exit: Exit.Exit<unknown, unknown>) => {
  assert.isTrue(Exit.isFailure(exit))
  const defect = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
  assert.instanceOf(defect, RowDecodeError)
  return defect as RowDecodeError
}

describe("the queue's rows decoded by schemas", () => {
  it.effect("a row of the expected shape decodes: text instants become dates, the seq stays text", () =>
    Effect.gen(function*() {
      const [decoded] = yield* Rows.deliveries(Effect.succeed([{ ...row, seq: 7 }]))
      assert.strictEqual(decoded!.seq, "7")
      assert.instanceOf(decoded!.created_at, Date)
      assert.strictEqual(decoded!.attempts, 3)
    }))

  it.effect("a row of the wrong shape is a defect naming its table, not a value passed on", () =>
    Effect.gen(function*() {
      for (const wrong of [{ ...row, attempts: "3" }, { ...row, status: "lost" }, { ...row, target_id: undefined }]) {
        const exit = yield* Effect.exit(Rows.deliveries(Effect.succeed([wrong])))
        assert.strictEqual(decodeDefect(exit).table, "deliveries")
      }
    }))

  it.effect("a database failure stays an error (the worker tells an unreachable database from a bad row)", () =>
    Effect.gen(function*() {
      const failure = new SqlError({
        reason: new ConnectionError({ cause: new Error("refused"), message: "connection refused" })
      })
      const error = yield* Effect.flip(Rows.deliveries(Effect.fail(failure)))
      assert.strictEqual(error, failure)
    }))

  it.effect("the queue's operations decode what their statements answer", () =>
    Effect.gen(function*() {
      const input = { orgId: row.org_id, kind: "webhook" as const, deliveryId: row.id }
      const found = yield* Listing.get(answering([row]), input)
      assert.isTrue(Option.isSome(found) && found.value.attempts === 3 && found.value.createdAt instanceof Date)
      const exit = yield* Effect.exit(Listing.get(answering([{ ...row, attempts: null }]), input))
      assert.strictEqual(decodeDefect(exit).table, "deliveries")
    }))
})
