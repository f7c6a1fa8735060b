/**
 * Which rules on arguments may run on the event loop instead of in the
 * rule workers (`RuleWorkers.ts`): those whose cost for the step is
 * proved small before they run.
 *
 * Speeds up: a step decided by rules. A rule worker is a child process
 * (`RuleWorkers.ts`): its round trip costs about 36 µs of the server's CPU
 * and 176 µs of wall time (two rules on small arguments, 2 000 in a row,
 * a shared 2-core machine at load 18), plus the child's own, where the ten
 * rules of the steps benchmark (`BENCH_RULES`) cost 3 µs in-process, on a
 * step of 500 to 800 µs.
 *
 * The proof is a bound computed from the condition's syntax tree when it
 * is compiled. Only "flat" conditions have one: no comprehension (`all`,
 * `exists`, `exists_one`, `map`, `filter`), no `cel.bind`, and no function
 * outside a list whose result is at most as large as its operands (`size`,
 * `has`, conversions, `startsWith`, `endsWith`, `contains`, `indexOf`,
 * `lowerAscii`, `trim`, `substring`, ...): `split`, `join`, bytes and time
 * functions are not in it. A flat condition's tree evaluates each node
 * once, and each value it builds is at most the sum of the leaves below it
 * (`+` concatenates; nothing repeats a value). So with w the weight of the
 * step's arguments (`weightOf`: characters of strings and member names,
 * plus one per value), every value is at most `p·w + q` and every node costs
 * at most the sizes of its operands (a string search: their product),
 * which sums to `w2·w² + w1·w + w0` units per condition. A unit is about a
 * nanosecond: a node counts `NODE_UNITS` for its dispatch, a character or
 * an element one. The policy runs here when the sum over its rules is at
 * most `IN_PROCESS_UNITS` (test `in-process-rules.test.ts` times the
 * largest such policy); otherwise all its rules run in a worker.
 */

export interface AstNode {
  readonly op: string
  readonly args: unknown
  readonly pos?: number
}

export const isNode = (value: unknown): value is AstNode =>
  typeof value === "object" && value !== null && !Array.isArray(value) && typeof (value as AstNode).op === "string"

/** Units a policy may cost to run on the event loop (about 200 µs). */
export const IN_PROCESS_UNITS = 200_000

/** Units of one node's dispatch in the evaluator. */
const NODE_UNITS = 50

/** The longest `tool` a step carries (its schema) and a session id's size. */
const TOOL_SIZE = 200
const SESSION_SIZE = 64

/** A condition's cost on arguments of weight w: at most `w2·w² + w1·w + w0` units. */
export interface CostBound {
  readonly w2: number
  readonly w1: number
  readonly w0: number
}

/** A value's size: at most `p·w + q`. */
interface Size {
  readonly p: number
  readonly q: number
}

interface Bound {
  readonly size: Size
  readonly cost: CostBound
}

const ONE: Size = { p: 0, q: 1 }
const sum = (sizes: ReadonlyArray<Size>): Size => ({
  p: sizes.reduce((a, s) => a + s.p, 0),
  q: sizes.reduce((a, s) => a + s.q, 0)
})
const add = (...costs: ReadonlyArray<CostBound>): CostBound => ({
  w2: costs.reduce((a, c) => a + c.w2, 0),
  w1: costs.reduce((a, c) => a + c.w1, 0),
  w0: costs.reduce((a, c) => a + c.w0, 0)
})
/** Work linear in `size`, plus the node's dispatch. */
const linear = (size: Size): CostBound => ({ w2: 0, w1: size.p, w0: size.q + NODE_UNITS })
/** A string search of `b` in `a`: at most their product (the naive bound), plus both. */
const product = (a: Size, b: Size): CostBound => ({ w2: a.p * b.p, w1: a.p * b.q + b.p * a.q, w0: a.q * b.q })

/** Calls whose result is one small value; their cost is linear in their operands. */
const SMALL_RESULT = new Set(["size", "has", "int", "uint", "double", "bool", "startsWith", "endsWith"])
/** Calls whose result is at most their receiver or first operand. */
const SAME_SIZE = new Set(["string", "dyn", "lowerAscii", "upperAscii", "trim", "substring"])
/** String searches: their cost is the product of the operands' sizes. */
const SEARCHES = new Set(["contains", "indexOf", "lastIndexOf"])
const SCALAR_OPERATORS = new Set(["==", "!=", "<", "<=", ">", ">=", "in", "-", "*", "/", "%", "&&", "||"])

const literalSize = (value: unknown): number =>
  typeof value === "string" ? value.length : value instanceof Uint8Array ? value.length : 1

/**
 * The bound of one node, or undefined when it is not flat. Recursive: the
 * tree is at most `SVC_APPROVAL_RULE_MAX_DEPTH` deep.
 */
const boundOf = (node: unknown): Bound | undefined => {
  if (!isNode(node)) return undefined
  const all = (children: ReadonlyArray<unknown>) => {
    const bounds: Array<Bound> = []
    for (const child of children) {
      const bound = boundOf(child)
      if (bound === undefined) return undefined
      bounds.push(bound)
    }
    return bounds
  }
  const of = (
    children: ReadonlyArray<unknown>,
    size: (sizes: ReadonlyArray<Size>) => Size,
    extra?: (sizes: ReadonlyArray<Size>) => CostBound
  ) => {
    const bounds = all(children)
    if (bounds === undefined) return undefined
    const sizes = bounds.map((b) => b.size)
    const own = extra === undefined ? [] : [extra(sizes)]
    return { size: size(sizes), cost: add(...bounds.map((b) => b.cost), linear(sum(sizes)), ...own) }
  }
  const args = node.args
  switch (node.op) {
    case "value": {
      const size = { p: 0, q: literalSize(args) }
      return { size, cost: linear(size) }
    }
    case "id": {
      const size = args === "arguments"
        ? { p: 1, q: 0 }
        : args === "tool"
        ? { p: 0, q: TOOL_SIZE }
        : args === "session"
        ? { p: 0, q: SESSION_SIZE }
        : undefined
      return size === undefined ? undefined : { size, cost: linear(size) }
    }
    case ".":
      return Array.isArray(args) ? of([args[0]], (s) => s[0]!) : undefined
    case "[]":
      return Array.isArray(args) ? of(args, (s) => s[0]!) : undefined
    case "list":
      return Array.isArray(args) ? of(args, (s) => ({ p: sum(s).p, q: sum(s).q + s.length })) : undefined
    case "map":
      return Array.isArray(args) ? of(args.flat(), sum) : undefined
    case "+":
    case "?:":
      return Array.isArray(args) ? of(args, sum) : undefined
    case "!_":
    case "-_":
      return of([args], () => ONE)
    case "call":
    case "rcall": {
      if (!Array.isArray(args) || typeof args[0] !== "string") return undefined
      const name = args[0]
      const operands: ReadonlyArray<unknown> = node.op === "call"
        ? args[1]
        : [args[1], ...(args[2] as ReadonlyArray<unknown>)]
      if (!Array.isArray(operands) || operands.length === 0) return undefined
      if (SMALL_RESULT.has(name)) return of(operands, () => ONE)
      if (SAME_SIZE.has(name)) return of(operands, (s) => ({ p: s[0]!.p, q: s[0]!.q + 32 }))
      if (SEARCHES.has(name)) return of(operands, () => ONE, (s) => product(s[0]!, s[1] ?? ONE))
      return undefined
    }
    default:
      return SCALAR_OPERATORS.has(node.op) && Array.isArray(args) ? of(args, () => ONE) : undefined
  }
}

/** A compiled condition's cost bound (`undefined`: it is not flat, it runs in a worker). */
export const costBound = (ast: unknown): CostBound | undefined => boundOf(ast)?.cost

/**
 * The weight of a JSON value (characters of its strings and member names,
 * plus one per value), counted up to a little past `cap`: the walk stops
 * there, so its cost is bounded by `cap`, not by the value.
 */
export const weightOf = (value: unknown, cap: number): number => {
  // Each value counts one when it is met (pushed), its characters when it is visited.
  let weight = 1
  const stack: Array<unknown> = [value]
  while (stack.length > 0 && weight <= cap) {
    const item = stack.pop()
    if (typeof item === "string") weight += item.length
    else if (Array.isArray(item)) {
      for (const child of item) {
        stack.push(child)
        if (++weight > cap) break
      }
    } else if (typeof item === "object" && item !== null) {
      for (const key in item) {
        stack.push((item as Record<string, unknown>)[key])
        weight += 1 + key.length
        if (weight > cap) break
      }
    }
  }
  return weight
}

/** Whether every rule of a policy is flat and their bounds for these arguments sum to at most `IN_PROCESS_UNITS`. */
export const runsInProcess = (
  rules: ReadonlyArray<{ readonly bound: CostBound | undefined }>,
  args: unknown
): boolean => {
  let total: CostBound = { w2: 0, w1: 0, w0: 0 }
  for (const rule of rules) {
    if (rule.bound === undefined) return false
    total = add(total, rule.bound)
  }
  if (total.w0 > IN_PROCESS_UNITS) return false
  if (total.w2 === 0 && total.w1 === 0) return true
  // The heaviest arguments that could still pass: the walk stops past them.
  const cap = Math.min(
    total.w1 > 0 ? IN_PROCESS_UNITS / total.w1 : Infinity,
    total.w2 > 0 ? Math.sqrt(IN_PROCESS_UNITS / total.w2) : Infinity
  )
  const w = weightOf(args, cap)
  return w <= cap && total.w2 * w * w + total.w1 * w + total.w0 <= IN_PROCESS_UNITS
}
