/**
 * Rules on arguments, in-process: how long one evaluation of the largest
 * rules the default limits allow takes (200 nodes, nesting 12, one to
 * three nested comprehensions over the widest arguments the cost budget
 * admits, so each runs to its last element), how long a hostile rule takes
 * to be refused by its cost estimate, and what the ten rules of the `steps`
 * scenario's `allow by the 10th rule` kind cost per step. Each shape is compiled
 * once, as a stored policy is, evaluated once cold, then warmed and timed.
 */
import { DEFAULT_POLICY } from "../../src/approvals/Deadlines.ts"
import { compileRules, type CompiledRule, resolve, type RuleLimits } from "../../src/approvals/Rules.ts"
import { BENCH_RULES } from "../scenarios/steps.ts"

/** The defaults of `SVC_APPROVAL_RULES_MAX`, `_RULE_MAX_LENGTH`, `_MAX_NODES`, `_MAX_DEPTH`, `_MAX_COST`. */
const LIMITS: RuleLimits = { maxRules: 50, maxLength: 2000, maxNodes: 200, maxDepth: 12, maxCost: 5000 }
const quick = ["1", "true", "yes"].includes(process.env.BENCH_QUICK ?? "")
const RUNS = quick ? 200 : 2000

const compile = (rules: ReadonlyArray<{ name: string; condition: string; result: unknown }>): ReadonlyArray<CompiledRule> => {
  const compiled = compileRules(rules as never, LIMITS)
  if (!compiled.ok) throw new Error(`${compiled.problem.field}: ${compiled.problem.detail}`)
  return compiled.rules
}

/** `count` clauses joined by `||` that never hold for the elements given (the scan runs to the end). */
const clauses = (variable: string, count: number) => Array.from({ length: count }, (_, i) => `${variable}.v == ${i}.0`).join(" || ")

/** The widest list whose cost estimate stays within the budget. */
const widthFor = (rule: CompiledRule) => Math.floor(Math.pow(LIMITS.maxCost / rule.nodes, 1 / rule.loops)) - 1

/** The most `||` clauses that keep a condition within the node limit (the limit refuses one more). */
const largest = (make: (count: number) => string) => {
  let best: string | undefined
  for (let count = 1; count < 200; count++) {
    const result = compileRules([{ name: "big", condition: make(count), result: { decision: "allow" } }] as never, LIMITS)
    if (!result.ok) break
    best = make(count)
  }
  return best!
}

const nested = (depth: number) => {
  // `((((a || b) || c) ...)` nested to `depth` parentheses around string and number tests.
  let condition = `tool == "t0"`
  for (let i = 1; i < depth; i++) condition = `(${condition} || arguments.k${i % 4} == "v${i}")`
  return condition
}

const step = (args: unknown, tool = "shell") => ({ tool, arguments: args, session: { id: "00000000-0000-4000-8000-000000000000" } })

interface Shape {
  readonly name: string
  readonly rules: ReadonlyArray<CompiledRule>
  readonly args: unknown
  readonly tool?: string
  /** What the evaluation must answer (the rule that decided, or the error's rule). */
  readonly expect: string
}

const shapes = (): ReadonlyArray<Shape> => {
  const one = compile([{ name: "exists-1", condition: largest((n) => `arguments.items.exists(x, ${clauses("x", n)})`), result: { decision: "allow" } }])
  const two = compile([{
    name: "exists-2",
    condition: largest((n) => `arguments.items.exists(x, arguments.items.exists(y, ${clauses("x", n)} || y.v == -1.0))`),
    result: { decision: "allow" }
  }])
  const three = compile([{
    name: "exists-3",
    condition: largest((n) => `arguments.items.exists(x, arguments.items.exists(y, arguments.items.exists(z, ${clauses("x", n)} || y.v == -1.0 || z.v == -1.0)))`),
    result: { decision: "allow" }
  }])
  const deep = compile([{ name: "deep", condition: nested(LIMITS.maxDepth - 1), result: { decision: "allow" } }])
  const cubic = compile([{
    name: "cubic",
    condition: "arguments.items.all(x, arguments.items.all(y, arguments.items.all(z, x + y + z >= 0.0)))",
    result: { decision: "allow" }
  }])
  const items = (rule: CompiledRule) => ({ items: Array.from({ length: widthFor(rule) }, (_, i) => ({ v: 1000 + i })) })
  return [
    { name: `largest, 1 comprehension (${one[0]!.nodes} nodes, ${widthFor(one[0]!)} items)`, rules: one, args: items(one[0]!), expect: "none" },
    { name: `largest, 2 nested (${two[0]!.nodes} nodes, ${widthFor(two[0]!)} items)`, rules: two, args: items(two[0]!), expect: "none" },
    { name: `largest, 3 nested (${three[0]!.nodes} nodes, ${widthFor(three[0]!)} items)`, rules: three, args: items(three[0]!), expect: "none" },
    { name: `nesting ${LIMITS.maxDepth - 1}, no comprehension (${deep[0]!.nodes} nodes)`, rules: deep, args: { k0: "a", k1: "b", k2: "c", k3: "d" }, expect: "none" },
    { name: "hostile: 3 nested over 2 000 items, refused by its estimate", rules: cubic, args: { items: Array.from({ length: 2000 }, (_, i) => i) }, expect: "error cubic" },
    { name: "the steps scenario's 10 rules, the 10th decides", rules: compile(BENCH_RULES), args: { command: "ls -la /srv/app", cwd: "/srv" }, expect: "shell-srv" }
  ]
}

const quantile = (sorted: ReadonlyArray<number>, q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN
const us = (ms: number) => Math.round(ms * 1000 * 10) / 10

export default async () => {
  const rows = shapes().map((shape) => {
    const facts = step(shape.args, shape.tool)
    const once = () => {
      const answer = resolve(DEFAULT_POLICY, shape.rules, facts, LIMITS.maxCost)
      const got = answer.rule ?? (answer.error ? `error ${answer.error.rule}` : "none")
      if (got !== shape.expect) throw new Error(`${shape.name}: answered ${got}, expected ${shape.expect}`)
    }
    let started = performance.now()
    once()
    const cold = performance.now() - started
    for (let i = 0; i < Math.min(RUNS, 200); i++) once()
    const times: Array<number> = []
    for (let i = 0; i < RUNS; i++) {
      started = performance.now()
      once()
      times.push(performance.now() - started)
    }
    times.sort((a, b) => a - b)
    return {
      rule: shape.name,
      "cold µs": us(cold),
      "p50 µs": us(quantile(times, 0.5)),
      "p99 µs": us(quantile(times, 0.99)),
      "max µs": us(times[times.length - 1]!)
    }
  })
  return {
    rows,
    notes: [
      `Default limits: ${LIMITS.maxNodes} nodes, depth ${LIMITS.maxDepth}, ${LIMITS.maxLength} characters, cost budget ${LIMITS.maxCost} (SVC_APPROVAL_RULE_MAX_*); the budget to stay within: an answer-schema check's deadline, SVC_ANSWER_VALIDATION_TIMEOUT = 1 s.`,
      `Each shape compiled once; 'cold' is its first evaluation; then ${Math.min(RUNS, 200)} warm-up and ${RUNS} timed evaluations (resolve: the cost estimate and the walk), in this process, on whatever else the machine runs.`
    ]
  }
}
