/**
 * Which rules run on the event loop: flat conditions (no comprehension, no
 * binding, no function that builds lists or strings) whose cost bound for
 * the step's arguments is within `IN_PROCESS_UNITS`; everything else goes
 * to the rule workers. The largest policy the bound admits runs in well
 * under a millisecond's order.
 */
import { assert, describe, it } from "@effect/vitest"
import { BENCH_RULES } from "../../../bench/scenarios/steps.ts"
import type { PolicyRule } from "../../../src/api/Policies.ts"
import { IN_PROCESS_UNITS, runsInProcess, weightOf } from "../../../src/approvals/InProcessRules.ts"
import { compileRules, evaluate, type RuleLimits } from "../../../src/approvals/Rules.ts"

const limits: RuleLimits = { maxRules: 50, maxLength: 2000, maxNodes: 200, maxDepth: 12 }

const compiled = (rules: ReadonlyArray<PolicyRule>) => {
  const result = compileRules(rules, limits)
  if (!result.ok) throw new Error(`${result.problem.field}: ${result.problem.detail}`)
  return result.rules
}
const one = (condition: string) => compiled([{ name: "r", condition, result: { decision: "allow" } }])

describe("rules that run on the event loop", () => {
  it("flat conditions have a bound; comprehensions, bindings and functions that build do not", () => {
    for (const condition of BENCH_RULES.map((rule) => rule.condition)) {
      assert.isDefined(one(condition)[0]!.bound, condition)
    }
    for (
      const condition of [
        `arguments.l.exists(x, x == 1)`,
        `arguments.l.map(x, x).size() > 0`,
        `cel.bind(x, arguments.s, x == "a")`,
        `arguments.s.split(",").size() > 1`,
        `["a"].join(",") == "a"`
      ]
    ) assert.isUndefined(one(condition)[0]!.bound, condition)
  })

  it("a policy runs here only when its bound for the step's arguments is within the units; a heavy step goes to a worker", () => {
    const rules = compiled(BENCH_RULES as ReadonlyArray<PolicyRule>)
    assert.isTrue(runsInProcess(rules, { command: "ls -la /srv/app", cwd: "/srv" }))
    assert.isFalse(runsInProcess(rules, { command: "ls", cwd: "/srv", note: "x".repeat(64 * 1024) }))
    assert.isFalse(runsInProcess([...rules, ...one(`arguments.l.exists(x, x == 1)`)], { command: "ls", cwd: "/srv" }))
  })

  it("the weight walk stops past its cap, whatever the arguments' size", () => {
    const huge = { l: Array.from({ length: 200_000 }, (_, i) => ({ k: i })) }
    const started = performance.now()
    const weight = weightOf(huge, 1000)
    assert.isAbove(weight, 1000)
    assert.isBelow(weight, 1010)
    assert.isBelow(performance.now() - started, 20)
  })

  it("the most expensive policy the bound admits evaluates within a few milliseconds", () => {
    // Rules of string searches on the arguments, as many as the node limit takes, none holding.
    const searches = Array.from({ length: 28 }, (_, i) => `arguments.s.contains("${"ab".repeat(4)}${i}")`).join(" || ")
    const rules = compiled(
      Array.from({ length: 10 }, (_, i) => ({ name: `r${i}`, condition: searches, result: { decision: "allow" } }))
    )
    // The longest string the bound still admits.
    let low = 0
    let high = 1 << 20
    while (low < high) {
      const mid = Math.ceil((low + high) / 2)
      if (runsInProcess(rules, { s: "ab".repeat(mid) })) low = mid
      else high = mid - 1
    }
    assert.isAbove(low, 0)
    const facts = {
      tool: "shell",
      arguments: { s: "ab".repeat(low) },
      session: { id: "00000000-0000-4000-8000-000000000000" }
    }
    const programs = rules.map((rule) => rule.program)
    for (let i = 0; i < 20; i++) evaluate(programs, facts)
    // The fastest of 20: a shared machine preempts single runs for tens of milliseconds.
    let took = Infinity
    for (let i = 0; i < 20; i++) {
      const started = performance.now()
      assert.deepStrictEqual(evaluate(programs, facts), { held: -1 })
      took = Math.min(took, performance.now() - started)
    }
    // The bound is IN_PROCESS_UNITS (about 200 µs).
    assert.isBelow(took, 2, `took ${took} ms at ${IN_PROCESS_UNITS} units`)
  })
})
