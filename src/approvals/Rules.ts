/**
 * Rules on arguments: a policy's ordered CEL conditions, compiled once when
 * the policy is stored or read into the process's cache, and evaluated on
 * each governed step before the class's settings.
 *
 * The CEL implementation is `@marcbachmann/cel-js`: no dependencies, a type
 * checker over declared variables (`check`), parse and type errors carrying
 * the character position, and parse-time limits on AST nodes and nesting
 * depth. (`@bufbuild/cel` is conformance-tested but brings protobuf runtime
 * types and no structural limits; `cel-js` 0.8 has no type checker.) None
 * of them bounds evaluation cost, so the bound is svc's, and it is proved
 * before a rule runs, so evaluation stays in-process on the hot path:
 *
 * - a condition's size (characters), AST nodes and nesting depth are
 *   limited when stored (`SVC_APPROVAL_RULE_MAX_LENGTH`, `_MAX_NODES`,
 *   `_MAX_DEPTH`), as is the number of rules (`SVC_APPROVAL_RULES_MAX`);
 * - `matches` (a regular expression: backtracking in JavaScript) is refused;
 * - what a rule can cost is at most its nodes times (n + 1) to the power of
 *   its comprehension nesting (`all`, `exists`, `exists_one`, `map`,
 *   `filter`), where n is the longest list or map in the step's arguments.
 *   That estimate is computed before evaluating; over
 *   `SVC_APPROVAL_RULE_MAX_COST` the rule is not evaluated (it counts as an
 *   evaluation error: the class's settings decide). One unit is about a
 *   microsecond: the default budget (5 000) held a rule of the largest
 *   allowed kind 0.2 to 4 ms on a shared 2-core machine (test
 *   `rules.test.ts`), far inside an answer-schema check's deadline
 *   (`SVC_ANSWER_VALIDATION_TIMEOUT`, 1 s), so no rule holds the event loop
 *   longer than that. A rule without comprehensions costs its nodes: a
 *   199-node condition evaluated in 4 to 15 µs.
 */
import { Environment } from "@marcbachmann/cel-js"
import type { PolicyRule, RuleResult } from "../api/Approvals.ts"
import type { PolicyRule as DeadlineSettings } from "./Deadlines.ts"

export interface RuleLimits {
  readonly maxRules: number
  readonly maxLength: number
  readonly maxNodes: number
  readonly maxDepth: number
  readonly maxCost: number
}

/** Why a policy's rules are refused: the field at fault, and the limit when one was exceeded. */
export interface RuleProblem {
  readonly field: string
  readonly detail: string
  readonly limit?: { readonly name: string; readonly value: number }
}

interface Program {
  (context: Record<string, unknown>): unknown
  readonly ast: unknown
}

export interface CompiledRule {
  readonly name: string
  readonly result: RuleResult
  readonly program: Program
  readonly nodes: number
  /** How deeply comprehensions nest (0: none, evaluation is linear in the condition). */
  readonly loops: number
}

/** What decided a step: a rule (by name) with its result, or the class's settings (`rule: null`). */
export type RuleVerdict =
  | { readonly rule: string; readonly result: RuleResult }
  | { readonly rule: null; readonly error?: { readonly rule: string; readonly message: string } }

const COMPREHENSIONS = new Set(["all", "exists", "exists_one", "map", "filter"])

const environments = new Map<string, Environment>()

/** One environment per (nodes, depth) limits: the variables a condition sees. */
const environment = (limits: RuleLimits): Environment => {
  const key = `${limits.maxNodes}:${limits.maxDepth}`
  let env = environments.get(key)
  if (env === undefined) {
    env = new Environment({ limits: { maxAstNodes: limits.maxNodes, maxDepth: limits.maxDepth } })
      .registerVariable("tool", "string")
      .registerVariable("arguments", "dyn")
      .registerVariable("session", "map")
    environments.set(key, env)
  }
  return env
}

interface AstNode {
  readonly op: string
  readonly args: unknown
  readonly pos?: number
}

const isNode = (value: unknown): value is AstNode =>
  typeof value === "object" && value !== null && !Array.isArray(value) && typeof (value as AstNode).op === "string"

/** Nodes, comprehension nesting and the position of a `matches` call, by one iterative walk. */
const measure = (ast: unknown): { nodes: number; loops: number; matchesAt: number | undefined } => {
  let nodes = 0
  let loops = 0
  let matchesAt: number | undefined
  const stack: Array<{ value: unknown; loops: number }> = [{ value: ast, loops: 0 }]
  while (stack.length > 0) {
    const { value, loops: depth } = stack.pop()!
    if (Array.isArray(value)) {
      for (const item of value) stack.push({ value: item, loops: depth })
      continue
    }
    if (!isNode(value)) continue
    nodes++
    let inner = depth
    if ((value.op === "rcall" || value.op === "call") && Array.isArray(value.args) && typeof value.args[0] === "string") {
      const name = value.args[0]
      if (name === "matches" && matchesAt === undefined) matchesAt = value.pos ?? 0
      if (value.op === "rcall" && COMPREHENSIONS.has(name)) inner = depth + 1
    }
    loops = Math.max(loops, inner)
    stack.push({ value: value.args, loops: inner })
  }
  return { nodes, loops, matchesAt }
}

/** The first line of a CEL error and its position as `line L, column C` (1-based). */
const located = (condition: string, error: unknown): string => {
  const message = error instanceof Error ? error.message.split("\n")[0]! : String(error)
  const node = (error as { node?: { pos?: number } } | null)?.node
  const pos = typeof node?.pos === "number" ? node.pos : undefined
  if (pos === undefined) return message
  const before = condition.slice(0, pos).split("\n")
  return `${message} at line ${before.length}, column ${before[before.length - 1]!.length + 1} (offset ${pos})`
}

/** Compiles a policy's rules: parsed, type-checked to `bool`, measured against the limits. */
export const compileRules = (
  rules: ReadonlyArray<PolicyRule>,
  limits: RuleLimits
): { readonly ok: true; readonly rules: ReadonlyArray<CompiledRule> } | { readonly ok: false; readonly problem: RuleProblem } => {
  if (rules.length > limits.maxRules) {
    return {
      ok: false,
      problem: {
        field: "rules",
        detail: `A policy has at most ${limits.maxRules} rules (SVC_APPROVAL_RULES_MAX).`,
        limit: { name: "SVC_APPROVAL_RULES_MAX", value: limits.maxRules }
      }
    }
  }
  const env = environment(limits)
  const compiled: Array<CompiledRule> = []
  for (const [index, rule] of rules.entries()) {
    const field = `rules[${index}].condition`
    const refuse = (detail: string, limit?: RuleProblem["limit"]) => ({
      ok: false as const,
      problem: { field, detail: `Rule ${JSON.stringify(rule.name)}: ${detail}`, ...(limit === undefined ? {} : { limit }) }
    })
    if (rule.condition.length > limits.maxLength) {
      return refuse(`the condition is longer than ${limits.maxLength} characters (SVC_APPROVAL_RULE_MAX_LENGTH).`, {
        name: "SVC_APPROVAL_RULE_MAX_LENGTH",
        value: limits.maxLength
      })
    }
    let program: Program
    try {
      program = env.parse(rule.condition) as unknown as Program
    } catch (error) {
      const text = located(rule.condition, error)
      if (text.startsWith("Exceeded maxAstNodes")) {
        return refuse(`the condition has more than ${limits.maxNodes} nodes (SVC_APPROVAL_RULE_MAX_NODES).`, {
          name: "SVC_APPROVAL_RULE_MAX_NODES",
          value: limits.maxNodes
        })
      }
      if (text.startsWith("Exceeded maxDepth")) {
        return refuse(`the condition nests deeper than ${limits.maxDepth} (SVC_APPROVAL_RULE_MAX_DEPTH): ${text}.`, {
          name: "SVC_APPROVAL_RULE_MAX_DEPTH",
          value: limits.maxDepth
        })
      }
      return refuse(`does not parse: ${text}.`)
    }
    const checked = env.check(rule.condition) as { valid: boolean; type?: string; error?: unknown }
    if (!checked.valid) return refuse(`does not type-check: ${located(rule.condition, checked.error)}.`)
    if (checked.type !== "bool" && checked.type !== "dyn") return refuse(`the condition is of type ${checked.type}, not bool.`)
    const { loops, matchesAt, nodes } = measure(program.ast)
    if (matchesAt !== undefined) {
      return refuse(`matches() is not allowed (regular expressions can backtrack without bound) at offset ${matchesAt}.`)
    }
    compiled.push({ name: rule.name, result: rule.result, program, nodes, loops })
  }
  return { ok: true, rules: compiled }
}

/** The number of elements of the longest list or map in `value` (one iterative walk). */
export const widest = (value: unknown): number => {
  let widest = 0
  const stack: Array<unknown> = [value]
  while (stack.length > 0) {
    const item = stack.pop()
    if (typeof item !== "object" || item === null) continue
    const children = Array.isArray(item) ? item : Object.values(item)
    widest = Math.max(widest, children.length)
    for (const child of children) stack.push(child)
  }
  return widest
}

export interface StepFacts {
  readonly tool: string
  readonly arguments: unknown
  readonly session: { readonly id: string }
}

/**
 * The first rule whose condition holds for the step. A rule that cannot be
 * evaluated (a missing key, a type the condition does not expect, over the
 * cost budget) ends the walk: the class's settings decide, as when none
 * holds, and the error is returned for the dry run.
 */
export const decide = (rules: ReadonlyArray<CompiledRule>, facts: StepFacts, maxCost: number): RuleVerdict => {
  if (rules.length === 0) return { rule: null }
  let width: number | undefined
  const context = { tool: facts.tool, arguments: facts.arguments, session: facts.session }
  for (const rule of rules) {
    if (rule.loops > 0) {
      width ??= widest(facts.arguments)
      const cost = rule.nodes * Math.pow(width + 1, rule.loops)
      if (cost > maxCost) {
        return {
          rule: null,
          error: {
            rule: rule.name,
            message: `evaluating the rule would cost about ${Math.round(cost)}, over ${maxCost} (SVC_APPROVAL_RULE_MAX_COST)`
          }
        }
      }
    }
    let holds: unknown
    try {
      holds = rule.program(context)
    } catch (error) {
      return { rule: null, error: { rule: rule.name, message: (error instanceof Error ? error.message : String(error)).split("\n")[0]! } }
    }
    if (holds === true) return { rule: rule.name, result: rule.result }
  }
  return { rule: null }
}

/** How a step is decided: by a rule or the class's settings, with the deadlines of the approval when a person must decide. */
export interface Resolution {
  readonly decision: "allow" | "reject" | "pending"
  /** The rule that decided; null when the class's settings did. */
  readonly rule: string | null
  /** A rejecting rule's reason. */
  readonly reason?: string
  /** The deadline settings of the approval (for `pending`): the rule's or the class's. */
  readonly settings: DeadlineSettings
  readonly error?: { readonly rule: string; readonly message: string }
}



/** The step's decision: the first matching rule's result, else the class's settings. */
export const resolve = (
  settings: DeadlineSettings,
  rules: ReadonlyArray<CompiledRule>,
  facts: StepFacts,
  maxCost: number
): Resolution => {
  const verdict = decide(rules, facts, maxCost)
  if (verdict.rule === null) {
    const decision = settings.mode === "allow" ? "allow" : settings.mode === "reject" ? "reject" : "pending"
    return { decision, rule: null, settings, ...(verdict.error === undefined ? {} : { error: verdict.error }) }
  }
  const result = verdict.result
  switch (result.decision) {
    case "allow":
      return { decision: "allow", rule: verdict.rule, settings }
    case "reject":
      return { decision: "reject", rule: verdict.rule, reason: result.reason, settings }
    case "require_approval":
      return {
        decision: "pending",
        rule: verdict.rule,
        settings: {
          mode: "require_approval",
          review_seconds: result.review_seconds,
          expiring_notice_seconds: result.expiring_notice_seconds,
          escalation_seconds: result.escalation_seconds ?? null,
          timeout_action: result.timeout_action,
          ...(result.quorum === undefined ? {} : { quorum: result.quorum }),
          ...(result.group === undefined ? {} : { group: result.group }),
          ...(result.escalation_chain === undefined ? {} : { escalation_chain: result.escalation_chain })
        }
      }
  }
}
