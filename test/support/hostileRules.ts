/**
 * Rules on arguments that cost far more than their size suggests, each with
 * the step arguments that make it so, scaled to what the default limits
 * allow (a condition of at most 2 000 characters, a body of at most 1 MiB):
 * the rule builds its own lists and strings (`split`, `map`, `cel.bind`) or
 * does string work in a comprehension. Unbounded, each holds a thread for
 * seconds to forever, and the `map` one grows the heap by gigabytes.
 */
import type { PolicyRule } from "../../src/api/Policies.ts"

export interface HostileRule {
  readonly name: string
  readonly rule: PolicyRule
  readonly arguments: Record<string, unknown>
}

const allow = { decision: "allow" } as const

/** A string literal of `n` distinct-enough characters, for `split("")`. */
const letters = (n: number) => Array.from({ length: n }, (_, i) => String.fromCharCode(97 + (i % 26))).join("")

export const hostileRules = (): ReadonlyArray<HostileRule> => {
  const s = letters(600)
  return [
    {
      // Three nested `exists` over a literal split into characters: 600³ iterations.
      name: "split-exists",
      rule: {
        name: "split-exists",
        condition: `"${s}".split("").exists(a, "${s}".split("").exists(b, "${
          s.slice(0, 580)
        }".split("").exists(c, a + b + c == "0")))`,
        result: allow
      },
      arguments: {}
    },
    {
      // The `map` variant: builds 600 × 600 strings per outer item, and lists of them.
      name: "split-map",
      rule: {
        name: "split-map",
        condition: `"${s}".split("").map(a, "${s}".split("").map(b, "${
          s.slice(0, 580)
        }".split("").map(c, a + b + c))).size() == 0`,
        result: allow
      },
      arguments: {}
    },
    {
      // `cel.bind` of a list the arguments split into, iterated four deep: 2 000⁴.
      name: "bind-loop",
      rule: {
        name: "bind-loop",
        condition:
          `cel.bind(x, arguments.s.split(""), x.exists(a, x.exists(b, x.exists(c, x.exists(d, a + b + c + d == "0")))))`,
        result: allow
      },
      arguments: { s: letters(2000) }
    },
    {
      // A reasonable-looking stored rule over two comma lists of 250 KB each: 125 000² comparisons.
      name: "recipients",
      rule: {
        name: "recipients",
        condition: `arguments.recipients.split(",").exists(r, arguments.blocked.split(",").exists(b, r == b))`,
        result: allow
      },
      arguments: {
        recipients: Array.from({ length: 125_000 }, () => "a").join(","),
        blocked: Array.from({ length: 125_000 }, () => "b").join(",")
      }
    },
    {
      // String work inside a comprehension: a 400 KB search for each of 100 000 items.
      name: "contains-loop",
      rule: {
        name: "contains-loop",
        condition: `arguments.l.exists(x, arguments.s.contains(arguments.t))`,
        result: allow
      },
      arguments: { l: Array.from({ length: 100_000 }, () => 0), s: "ab".repeat(200_000), t: `${"ab".repeat(500)}c` }
    }
  ]
}
