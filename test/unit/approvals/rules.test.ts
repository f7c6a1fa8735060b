/**
 * Rules on arguments: compiled once (parsed, type-checked, measured against
 * the limits), the first matching rule decides, the class's settings are the
 * fallback (the budget while they run: `rule-workers.test.ts`).
 */
import { assert, describe, it } from "@effect/vitest"
import type { PolicyRule } from "../../../src/api/Policies.ts"
import { DEFAULT_POLICY } from "../../../src/approvals/Deadlines.ts"
import {
  type CompiledRule,
  compileRules,
  evaluate,
  resolve as resolveVerdict,
  type RuleLimits,
  type StepFacts,
  verdictOf
} from "../../../src/approvals/Rules.ts"

const limits: RuleLimits = { maxRules: 50, maxLength: 2000, maxNodes: 200, maxDepth: 12 }

/** The step's decision by rules evaluated here (the rule workers run the same `evaluate`). */
const resolve = (
  settings: Parameters<typeof resolveVerdict>[0],
  rules: ReadonlyArray<CompiledRule>,
  facts: StepFacts
) => resolveVerdict(settings, verdictOf(rules, evaluate(rules.map((rule) => rule.program), facts)))

const refunds: ReadonlyArray<PolicyRule> = [
  { name: "small", condition: "arguments.amount <= 100.0", result: { decision: "allow" } },
  {
    name: "huge",
    condition: "arguments.amount > 5000.0",
    result: { decision: "reject", reason: "Above 5 000: finance decides." }
  },
  {
    name: "eur",
    condition: "tool == 'stripe.refund' && arguments.currency == 'EUR'",
    result: {
      decision: "require_approval",
      review_seconds: 60,
      expiring_notice_seconds: 10,
      escalation_seconds: 120,
      timeout_action: "allow"
    }
  },
  { name: "also-small", condition: "arguments.amount < 50.0", result: { decision: "reject", reason: "never reached" } }
]

const compiled = (rules: ReadonlyArray<PolicyRule>, over: Partial<RuleLimits> = {}) => {
  const result = compileRules(rules, { ...limits, ...over })
  if (!result.ok) throw new Error(`${result.problem.field}: ${result.problem.detail}`)
  return result.rules
}

const step = (args: unknown, tool = "stripe.refund") => ({
  tool,
  arguments: args,
  session: { id: "00000000-0000-0000-0000-000000000001" }
})

describe("rules on arguments", () => {
  const rules = compiled(refunds)
  const allowByDefault = { ...DEFAULT_POLICY, mode: "allow" as const }

  it("the first rule whose condition holds decides", () => {
    const small = resolve(DEFAULT_POLICY, rules, step({ amount: 20, currency: "EUR" }))
    assert.strictEqual(small.decision, "allow")
    assert.strictEqual(small.rule, "small")
  })

  it("a rejecting rule carries its reason", () => {
    const huge = resolve(DEFAULT_POLICY, rules, step({ amount: 6200, currency: "EUR" }))
    assert.deepStrictEqual([huge.decision, huge.rule, huge.reason], ["reject", "huge", "Above 5 000: finance decides."])
  })

  it("a rule requiring approval brings its own deadline settings", () => {
    const eur = resolve(allowByDefault, rules, step({ amount: 300, currency: "EUR" }))
    assert.strictEqual(eur.decision, "pending")
    assert.strictEqual(eur.rule, "eur")
    assert.deepStrictEqual(eur.settings, {
      mode: "require_approval",
      review_seconds: 60,
      expiring_notice_seconds: 10,
      escalation_seconds: 120,
      timeout_action: "allow"
    })
  })

  it("when no rule holds, the class's settings decide and no rule is named", () => {
    const usd = resolve(allowByDefault, rules, step({ amount: 300, currency: "USD" }))
    assert.deepStrictEqual([usd.decision, usd.rule], ["allow", null])
    const pending = resolve(DEFAULT_POLICY, rules, step({ amount: 300, currency: "USD" }))
    assert.deepStrictEqual([pending.decision, pending.rule, pending.settings], ["pending", null, DEFAULT_POLICY])
  })

  it("a rule that cannot be evaluated for the step ends the walk: the class's settings decide, the error names the rule", () => {
    const missing = resolve(allowByDefault, rules, step({ currency: "EUR" }))
    assert.deepStrictEqual([missing.decision, missing.rule, missing.error?.rule], ["allow", null, "small"])
  })

  it("a condition that does not parse is refused naming the rule and the position", () => {
    const result = compileRules([refunds[0]!, {
      name: "broken",
      condition: "arguments.amount >",
      result: { decision: "allow" }
    }], limits)
    assert.isFalse(result.ok)
    if (result.ok) return
    assert.strictEqual(result.problem.field, "rules[1].condition")
    assert.include(result.problem.detail, "\"broken\"")
    assert.include(result.problem.detail, "line 1, column 19")
  })

  it("a condition that does not type-check, or is not a bool, is refused naming the rule and the position", () => {
    const typed = compileRules(
      [{ name: "typed", condition: "true && tool > 1", result: { decision: "allow" } }],
      limits
    )
    assert.isFalse(typed.ok)
    if (!typed.ok) {
      assert.strictEqual(typed.problem.field, "rules[0].condition")
      assert.include(typed.problem.detail, "no such overload")
      assert.include(typed.problem.detail, "column 9")
    }
    const notBool = compileRules([{ name: "string", condition: "tool", result: { decision: "allow" } }], limits)
    assert.isFalse(notBool.ok)
    if (!notBool.ok) assert.include(notBool.problem.detail, "not bool")
    const sized = compileRules([{ name: "sized", condition: "\n  size(tool)", result: { decision: "allow" } }], limits)
    assert.isFalse(sized.ok)
    if (!sized.ok) {
      assert.strictEqual(sized.problem.field, "rules[0].condition")
      assert.include(sized.problem.detail, "of type int, not bool, at line 2, column 3")
    }
  })

  it("regular expressions (matches) are refused", () => {
    const result = compileRules(
      [{ name: "re", condition: "tool.matches('(a+)+$')", result: { decision: "allow" } }],
      limits
    )
    assert.isFalse(result.ok)
    if (!result.ok) assert.include(result.problem.detail, "matches()")
  })

  it("bounds: rule count, condition length, nodes and nesting are refused naming the setting", () => {
    const rule = (condition: string): PolicyRule => ({ name: "r", condition, result: { decision: "allow" } })
    const named = (rules: ReadonlyArray<PolicyRule>, over: Partial<RuleLimits>) => {
      const result = compileRules(rules, { ...limits, ...over })
      return result.ok ? undefined : result.problem.limit?.name
    }
    assert.strictEqual(named([rule("true"), { ...rule("true"), name: "s" }], { maxRules: 1 }), "SVC_APPROVAL_RULES_MAX")
    assert.strictEqual(named([rule("tool == 'abcdef'")], { maxLength: 10 }), "SVC_APPROVAL_RULE_MAX_LENGTH")
    assert.strictEqual(named([rule("1 + 1 + 1 + 1 + 1 + 1 == 6")], { maxNodes: 5 }), "SVC_APPROVAL_RULE_MAX_NODES")
    assert.strictEqual(named([rule("((((((((true))))))))")], { maxDepth: 4 }), "SVC_APPROVAL_RULE_MAX_DEPTH")
    assert.strictEqual(named([rule("tool == 'x'")], { maxRules: 1 }), undefined)
  })
})
