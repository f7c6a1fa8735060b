/**
 * Rules on arguments: a policy's ordered CEL conditions, checked when the
 * policy is stored (in a rule worker, `RuleWorkers.check`), compiled once
 * when it is read into the process's cache, and evaluated on each governed
 * step before the class's settings.
 *
 * The CEL implementation is `@marcbachmann/cel-js`: no dependencies, a type
 * checker over declared variables (`check`), parse and type errors carrying
 * the character position, and parse-time limits on AST nodes and nesting
 * depth. (`@bufbuild/cel` is conformance-tested but brings protobuf runtime
 * types and no structural limits; `cel-js` 0.8 has no type checker.) None
 * of them bounds evaluation cost, so the bound is svc's, enforced while a
 * rule runs rather than estimated before:
 *
 * - a condition's size (characters), AST nodes and nesting depth are
 *   limited when stored (`SVC_APPROVAL_RULE_MAX_LENGTH`, `_MAX_NODES`,
 *   `_MAX_DEPTH`), as is the number of rules (`SVC_APPROVAL_RULES_MAX`):
 *   parsing and type-checking are linear in them;
 * - `matches` (a regular expression: backtracking in JavaScript) is refused;
 * - a policy's rules are evaluated for a step in the validation workers
 *   (`RuleRuns.ts`, `../tasks/AnswerSchema.ts`), all of them within one
 *   deadline (`SVC_APPROVAL_RULES_TIMEOUT`) and the workers' heap
 *   (`SVC_ANSWER_VALIDATION_HEAP_MB`): a worker past either is ended and
 *   replaced, whatever the rule builds (`split`, `map`, `cel.bind`, strings);
 * - only rules whose cost is proved small for the step run on the event
 *   loop instead (`InProcessRules.ts`).
 */
import { Environment } from "@marcbachmann/cel-js"
import type { PolicyRule, RuleResult } from "../api/Policies.ts"
import type { PolicyRule as DeadlineSettings } from "./Deadlines.ts"
import { type CostBound, costBound, isNode } from "./InProcessRules.ts"

export interface RuleLimits {
  readonly maxRules: number
  readonly maxLength: number
  readonly maxNodes: number
  readonly maxDepth: number
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
  readonly condition: string
  readonly program: Program
  /** What evaluating it on the event loop can cost, when that is known (`InProcessRules.ts`); none: it runs in a worker. */
  readonly bound: CostBound | undefined
}

/** What decided a step: a rule (by name) with its result, or the class's settings (`rule: null`). */
export type RuleVerdict =
  | { readonly rule: string; readonly result: RuleResult }
  | { readonly rule: null; readonly error?: { readonly rule: string; readonly message: string } }

const environments = new Map<string, Environment>()

/** One environment per (nodes, depth) limits: the variables a condition sees. */
const environment = (limits: Pick<RuleLimits, "maxNodes" | "maxDepth">): Environment => {
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

/** The position of the first `matches` call, by one iterative walk. */
const matchesAt = (ast: unknown): number | undefined => {
  const stack: Array<unknown> = [ast]
  while (stack.length > 0) {
    const value = stack.pop()
    if (Array.isArray(value)) {
      for (const item of value) stack.push(item)
      continue
    }
    if (!isNode(value)) continue
    if ((value.op === "rcall" || value.op === "call") && Array.isArray(value.args) && value.args[0] === "matches") {
      return value.pos ?? 0
    }
    stack.push(value.args)
  }
  return undefined
}

/** `line L, column C (offset P)` of a character offset of `condition` (1-based). */
const lineAndColumn = (condition: string, pos: number) => {
  const before = condition.slice(0, pos).split("\n")
  return `line ${before.length}, column ${before[before.length - 1]!.length + 1} (offset ${pos})`
}

/** The first line of a CEL error and its position as `line L, column C` (1-based). */
const located = (condition: string, error: unknown): string => {
  const message = error instanceof Error ? error.message.split("\n")[0]! : String(error)
  const node = (error as { node?: { pos?: number } } | null)?.node
  const pos = typeof node?.pos === "number" ? node.pos : undefined
  if (pos === undefined) return message
  return `${message} at ${lineAndColumn(condition, pos)}`
}

/** Compiles a policy's rules: parsed, type-checked to `bool`, measured against the limits. */
export const compileRules = (
  rules: ReadonlyArray<PolicyRule>,
  limits: RuleLimits
): { readonly ok: true; readonly rules: ReadonlyArray<CompiledRule> } | {
  readonly ok: false
  readonly problem: RuleProblem
} => {
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
      problem: {
        field,
        detail: `Rule ${JSON.stringify(rule.name)}: ${detail}`,
        ...(limit === undefined ? {} : { limit })
      }
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
    if (checked.type !== "bool" && checked.type !== "dyn") {
      const at = (program.ast as { pos?: number } | null)?.pos ?? 0
      return refuse(
        `does not type-check: the condition is of type ${checked.type}, not bool, at ${
          lineAndColumn(rule.condition, at)
        }.`
      )
    }
    const regex = matchesAt(program.ast)
    if (regex !== undefined) {
      return refuse(
        `matches() is not allowed (regular expressions can backtrack without bound) at ${
          lineAndColumn(rule.condition, regex)
        }.`
      )
    }
    compiled.push({
      name: rule.name,
      result: rule.result,
      condition: rule.condition,
      program,
      bound: costBound(program.ast)
    })
  }
  return { ok: true, rules: compiled }
}

export interface StepFacts {
  readonly tool: string
  readonly arguments: unknown
  readonly session: { readonly id: string }
}

/** What evaluating a policy's rules for a step found: the index of the first that held (-1: none), or the rule that failed. */
export type Evaluation =
  | { readonly held: number }
  | { readonly failed: number; readonly message: string }

/**
 * Evaluates `programs` in order for the step, up to the first that holds.
 * One that cannot be evaluated (a missing key, a type the condition does
 * not expect) ends the walk. The caller bounds what this costs: the
 * programs run in a worker with a deadline, or are proved cheap.
 */
export const evaluate = (
  programs: ReadonlyArray<(context: Record<string, unknown>) => unknown>,
  facts: StepFacts,
  progress?: (index: number) => void
): Evaluation => {
  const context = { tool: facts.tool, arguments: facts.arguments, session: facts.session }
  for (const [index, program] of programs.entries()) {
    progress?.(index)
    let holds: unknown
    try {
      holds = program(context)
    } catch (error) {
      return { failed: index, message: (error instanceof Error ? error.message : String(error)).split("\n")[0]! }
    }
    if (holds === true) return { held: index }
  }
  return { held: -1 }
}

/** The verdict of an evaluation of `rules`. */
export const verdictOf = (
  rules: ReadonlyArray<Pick<CompiledRule, "name" | "result">>,
  evaluation: Evaluation
): RuleVerdict =>
  "failed" in evaluation
    ? { rule: null, error: { rule: rules[evaluation.failed]!.name, message: evaluation.message } }
    : evaluation.held < 0
    ? { rule: null }
    : { rule: rules[evaluation.held]!.name, result: rules[evaluation.held]!.result }

/** Programs of conditions parsed in this thread (a worker's), by limits and text; emptied when full. */
const parsed = new Map<string, Program>()
const PARSED_KEPT = 2_000

/**
 * The programs of stored conditions (already checked when stored), parsed
 * once per thread: the rule workers receive conditions as text.
 */
export const programsOf = (
  conditions: ReadonlyArray<string>,
  limits: Pick<RuleLimits, "maxNodes" | "maxDepth">
): ReadonlyArray<Program> => {
  const env = environment(limits)
  return conditions.map((condition) => {
    const key = `${limits.maxNodes}:${limits.maxDepth}:${condition}`
    let program = parsed.get(key)
    if (program === undefined) {
      if (parsed.size >= PARSED_KEPT) parsed.clear()
      program = env.parse(condition) as unknown as Program
      parsed.set(key, program)
    }
    return program
  })
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

/** The step's decision: the deciding rule's result, else the class's settings. */
export const resolve = (settings: DeadlineSettings, verdict: RuleVerdict): Resolution => {
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
