import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { DEFAULT_POLICY, type DueKind, fire, nextDue, noticeFits, plan, type PolicyRule, sleepMillis } from "../../../src/approvals/Deadlines.ts"

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0)

/** Fires deadlines until expiry, as the scheduler does. */
const run = (rule: PolicyRule) => {
  let state = plan(rule, T0)
  const fired: Array<{ kind: DueKind; at: number; deadlineAt: number }> = []
  for (;;) {
    const due = nextDue(state)
    fired.push({ ...due, deadlineAt: state.deadlineAt })
    if (due.kind === "expire") return { fired, state }
    state = fire(state, due.kind)
    if (fired.length > 10) throw new Error("does not terminate")
  }
}

describe("approval deadlines (pure time logic)", () => {
  it("the default rule: approval required, 15 min review, notice 5 min before, no escalation, reject", () => {
    assert.deepStrictEqual(DEFAULT_POLICY, {
      mode: "require_approval",
      review_seconds: 900,
      expiring_notice_seconds: 300,
      escalation_seconds: null,
      timeout_action: "reject"
    })
    const { fired } = run(DEFAULT_POLICY)
    assert.deepStrictEqual(fired.map((f) => [f.kind, f.at - T0]), [["expiring", 600_000], ["expire", 900_000]])
  })

  it("escalation moves the review deadline to expires_at and keeps expires_at", () => {
    const rule: PolicyRule = { mode: "require_approval", review_seconds: 60, expiring_notice_seconds: 10, escalation_seconds: 120, timeout_action: "allow" }
    const planned = plan(rule, T0)
    assert.strictEqual(planned.deadlineAt, T0 + 60_000)
    assert.strictEqual(planned.expiresAt, T0 + 180_000)
    const { fired, state } = run(rule)
    assert.deepStrictEqual(fired.map((f) => [f.kind, f.at - T0]), [["escalate", 60_000], ["expiring", 170_000], ["expire", 180_000]])
    assert.strictEqual(state.deadlineAt, state.expiresAt)
  })

  it("every deadline fires once, in time order, expiry last, whatever the rule", () => {
    const rules = fc.record({
      review: fc.integer({ min: 1, max: 10_000 }),
      escalation: fc.option(fc.integer({ min: 1, max: 10_000 }), { nil: null }),
      notice: fc.integer({ min: 0, max: 20_000 })
    }).filter((r) => noticeFits({ review_seconds: r.review, escalation_seconds: r.escalation, expiring_notice_seconds: r.notice }))
    fc.assert(fc.property(rules, ({ review, escalation, notice }) => {
      const rule: PolicyRule = { mode: "require_approval", review_seconds: review, expiring_notice_seconds: notice, escalation_seconds: escalation, timeout_action: "reject" }
      const { fired } = run(rule)
      const kinds = fired.map((f) => f.kind)
      const expected = [...(notice > 0 ? ["expiring"] : []), ...(escalation !== null ? ["escalate"] : []), "expire"]
      assert.deepStrictEqual([...kinds].sort(), [...expected].sort())
      assert.strictEqual(kinds.at(-1), "expire")
      for (let i = 1; i < fired.length; i++) assert.isAtLeast(fired[i]!.at, fired[i - 1]!.at)
      const expires = T0 + (review + (escalation ?? 0)) * 1000
      for (const f of fired) {
        assert.isAbove(f.at, T0)
        if (f.kind === "expiring") assert.strictEqual(f.at, expires - notice * 1000)
        if (f.kind === "escalate") assert.strictEqual(f.at, T0 + review * 1000)
        if (f.kind === "expire") assert.strictEqual(f.at, expires)
      }
    }))
  })

  it("the scheduler sleeps until the earliest deadline, never past the poll cap, never negative", () => {
    assert.strictEqual(sleepMillis(null, T0, 1000), 1000)
    assert.strictEqual(sleepMillis(T0 + 250, T0, 1000), 250)
    assert.strictEqual(sleepMillis(T0 + 5000, T0, 1000), 1000)
    assert.strictEqual(sleepMillis(T0 - 5000, T0, 1000), 0)
  })
})
