import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { escalationCount, MAX_ESCALATION_CHAIN } from "../../../src/api/Assignment.ts"
import { noticeFits } from "../../../src/api/Policies.ts"
import {
  DEFAULT_POLICY,
  type DueKind,
  escalationPending,
  fire,
  nextDue,
  plan,
  type PolicyRule,
  sleepMillis
} from "../../../src/approvals/Deadlines.ts"

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
    if (fired.length > 2 + MAX_ESCALATION_CHAIN) throw new Error("does not terminate")
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
    const rule: PolicyRule = {
      mode: "require_approval",
      review_seconds: 60,
      expiring_notice_seconds: 10,
      escalation_seconds: 120,
      timeout_action: "allow"
    }
    const planned = plan(rule, T0)
    assert.strictEqual(planned.deadlineAt, T0 + 60_000)
    assert.strictEqual(planned.expiresAt, T0 + 180_000)
    const { fired, state } = run(rule)
    assert.deepStrictEqual(fired.map((f) => [f.kind, f.at - T0]), [["escalate", 60_000], ["expiring", 170_000], [
      "expire",
      180_000
    ]])
    assert.strictEqual(state.deadlineAt, state.expiresAt)
  })

  it("a chain of three: each deadline escalates, one window of escalation_seconds each; it expires after the last group's window", () => {
    const rule: PolicyRule = {
      mode: "require_approval",
      review_seconds: 60,
      expiring_notice_seconds: 30,
      escalation_seconds: 120,
      timeout_action: "reject",
      group: "leads",
      escalation_chain: ["finance", "cfo", "board"]
    }
    const planned = plan(rule, T0)
    assert.strictEqual(planned.expiresAt, T0 + (60 + 3 * 120) * 1000)
    const { fired, state } = run(rule)
    assert.deepStrictEqual(fired.map((f) => [f.kind, (f.at - T0) / 1000]), [
      ["escalate", 60],
      ["escalate", 180],
      ["escalate", 300],
      ["expiring", 390],
      ["expire", 420]
    ])
    assert.strictEqual(state.escalationsDone, 3)
    assert.isFalse(escalationPending(state))
    assert.strictEqual(state.deadlineAt, state.expiresAt)
  })

  it("without a chain escalation_seconds gives exactly one escalation; without escalation_seconds a chain gives none", () => {
    assert.strictEqual(escalationCount({ escalation_seconds: 600 }), 1)
    assert.strictEqual(escalationCount({ escalation_seconds: 600, escalation_chain: ["a", "b"] }), 2)
    assert.strictEqual(escalationCount({ escalation_seconds: null, escalation_chain: ["a"] }), 0)
  })

  it("the notice must fall within the whole review time: review plus escalation_seconds per escalation", () => {
    const base = { review_seconds: 60, escalation_seconds: 100, escalation_chain: ["a", "b", "c"] }
    assert.isTrue(noticeFits({ ...base, expiring_notice_seconds: 359 }))
    assert.isFalse(noticeFits({ ...base, expiring_notice_seconds: 360 }))
    assert.isFalse(noticeFits({ ...base, escalation_chain: ["a"], expiring_notice_seconds: 160 }))
  })

  it("every due kind fires once per planned hop, in time order, expiry last, whatever the rule and chain", () => {
    const rules = fc.record({
      review: fc.integer({ min: 1, max: 10_000 }),
      escalation: fc.option(fc.integer({ min: 1, max: 10_000 }), { nil: null }),
      chain: fc.integer({ min: 0, max: MAX_ESCALATION_CHAIN }),
      notice: fc.integer({ min: 0, max: 60_000 })
    }).map((r) => ({ ...r, groups: Array.from({ length: r.chain }, (_, i) => `g${i}`) }))
      .filter((r) =>
        noticeFits({
          review_seconds: r.review,
          escalation_seconds: r.escalation,
          expiring_notice_seconds: r.notice,
          escalation_chain: r.groups
        })
      )
    fc.assert(fc.property(rules, ({ review, escalation, groups, notice }) => {
      const rule: PolicyRule = {
        mode: "require_approval",
        review_seconds: review,
        expiring_notice_seconds: notice,
        escalation_seconds: escalation,
        timeout_action: "reject",
        ...(groups.length === 0 ? {} : { escalation_chain: groups })
      }
      const { fired } = run(rule)
      const kinds = fired.map((f) => f.kind)
      const hops = escalation === null ? 0 : Math.max(1, groups.length)
      const expected = [
        ...(notice > 0 ? ["expiring"] : []),
        ...Array.from({ length: hops }, () => "escalate"),
        "expire"
      ]
      assert.deepStrictEqual([...kinds].sort(), [...expected].sort())
      assert.strictEqual(kinds.at(-1), "expire")
      for (let i = 1; i < fired.length; i++) assert.isAtLeast(fired[i]!.at, fired[i - 1]!.at)
      const expires = T0 + (review + (escalation ?? 0) * hops) * 1000
      const escalations = fired.filter((f) => f.kind === "escalate")
      // The n-th escalation fires when the n-th window ends: review, then escalation_seconds after each.
      escalations.forEach((f, n) => assert.strictEqual(f.at, T0 + (review + n * (escalation ?? 0)) * 1000))
      for (const f of fired) {
        assert.isAbove(f.at, T0)
        if (f.kind === "expiring") assert.strictEqual(f.at, expires - notice * 1000)
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
