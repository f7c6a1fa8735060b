/**
 * Which workers of this process a dispatcher's pass wakes, and for what:
 * a kind whose rows the pass queued are all the log's wakes its workers
 * for the log alone; a row on its own among them (a strict endpoint's, an
 * email) wakes them for both statements; a kind with none queued, not at all.
 */
import type { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { type Signal, Wakeups } from "../../../src/database/Wakeups.ts"
import { passWakeups } from "../../../src/notifications/dispatch/PassWakeups.ts"

/** Wakeups of the embedded database (nothing to notify), recording what this process was woken for. */
const recording = () => {
  const woke: Array<Signal> = []
  const wakeups = Wakeups.of({
    signal: () => Effect.void,
    inStatement: (...signals) => ({ notify: undefined, local: Effect.sync(() => void woke.push(...signals)) }),
    wait: () => Effect.void,
    subscribe: () => Effect.void
  })
  return { woke, wakeups }
}

/** Never asked for SQL: with nothing to notify, the pass adds no column. */
const noSql = (() => ({})) as unknown as PgClient.PgClient

describe("a pass's wakeups in this process", () => {
  it.effect("the log's rows alone: the log's topic; a row on its own among them: the kind's; none: nothing", () =>
    Effect.gen(function*() {
      const { wakeups, woke } = recording()
      const pass = passWakeups(noSql, wakeups)
      yield* pass.wake({ webhook: { all: 3, alone: 0 }, email: { all: 0, alone: 0 } })
      assert.deepStrictEqual(woke.splice(0), ["deliveries:webhook:log"])
      yield* pass.wake({ webhook: { all: 3, alone: 1 }, email: { all: 1, alone: 1 } })
      assert.deepStrictEqual(woke.splice(0), ["deliveries:webhook", "deliveries:email"])
      yield* pass.wake({ webhook: { all: 0, alone: 0 }, email: { all: 0, alone: 0 } })
      assert.deepStrictEqual(woke, [])
    }))
})
