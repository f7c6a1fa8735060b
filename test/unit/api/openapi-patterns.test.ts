/**
 * Every `pattern` of `/openapi.json` reads alike in the dialects the tools
 * that read the document use: ECMAScript with and without the `u` flag
 * (browsers, ajv, fast-check) and Python's `re` (most client generators and
 * property-based testers). So the document uses no construct only one of
 * them has or that they read differently: no Unicode property (`\p{...}`,
 * `\P{...}`), no class escape (`\d`, `\s`, `\w` and their negations, which
 * Python reads as Unicode classes of its own), no word boundary, no
 * lookbehind, no named group or back-reference, no inline flag. Each
 * pattern compiles with `new RegExp(p)`, `new RegExp(p, "u")` and (when
 * python3 is on the machine) Python's `re.compile` with warnings as
 * errors; and for strings around each pattern's own matches (with a
 * character swapped for one the dialects could class differently) both
 * engines give the same answer.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { spawnSync } from "node:child_process"
import { document } from "../../support/contract.ts"

/** Every pattern of the document: `pattern` members (also under `propertyNames`) and `patternProperties` keys. */
const patterns = (() => {
  const found = new Set<string>()
  const walk = (value: unknown): void => {
    if (Array.isArray(value)) return value.forEach(walk)
    if (typeof value !== "object" || value === null) return
    for (const [key, inner] of Object.entries(value)) {
      if (key === "pattern" && typeof inner === "string") found.add(inner)
      if (key === "patternProperties" && typeof inner === "object" && inner !== null) {
        Object.keys(inner).forEach((p) => found.add(p))
      }
      walk(inner)
    }
  }
  walk(document)
  return [...found]
})()

/** What in a pattern is not dialect-neutral, or `[]`. */
const unportable = (pattern: string): Array<string> => {
  const found: Array<string> = []
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!
    if (c === "\\") {
      const next = pattern[i + 1] ?? ""
      if ("pP".includes(next)) found.push(`\\${next}: a Unicode property (Python's re has none)`)
      if ("dDsSwW".includes(next)) found.push(`\\${next}: a class escape (Python reads it as a Unicode class)`)
      if ("bB".includes(next)) found.push(`\\${next}: a word boundary (word characters differ)`)
      if (next === "k" || /[1-9]/.test(next)) found.push(`\\${next}: a back-reference`)
      i++
      continue
    }
    if (c === "(" && pattern[i + 1] === "?") {
      const rest = pattern.slice(i + 2)
      if (rest.startsWith("<=") || rest.startsWith("<!")) found.push("(?<=, (?<!: a lookbehind")
      else if (rest.startsWith("<") || rest.startsWith("P")) found.push("(?<name>: a named group")
      else if (/^[a-zA-Z]/.test(rest)) found.push("(?flags: an inline flag")
    }
  }
  return found
}

/** The Python 3 on the machine, if any. */
const python = (() => {
  const probe = spawnSync("python3", ["-c", "import re"], { encoding: "utf8" })
  return probe.status === 0 ? "python3" : undefined
})()

const runPython = (script: string, input: unknown): any => {
  const result = spawnSync(python!, ["-W", "error", "-c", script], {
    input: JSON.stringify(input),
    encoding: "utf8",
    timeout: 60_000
  })
  assert.strictEqual(result.status, 0, result.stderr)
  return JSON.parse(result.stdout)
}

/** Characters the dialects could class differently (Unicode digits, spaces only one of them has). */
const TRICKY = ["\u0663", "\u001c", "\u0085", "\ufeff", "\u00a0", "\u2028", "\u00e9", "\t", " ", "_", "\u{1F600}"]

describe("the document's patterns read alike in ECMAScript and Python", () => {
  it("there are patterns to check (every pattern of the document)", () => {
    assert.isAbove(patterns.length, 12)
  })

  it("no pattern uses a construct one dialect lacks or reads otherwise (\\p, \\d, \\s, \\w, \\b, lookbehind, named groups, inline flags)", () => {
    const found = patterns.flatMap((pattern) => unportable(pattern).map((why) => `${pattern}: ${why}`))
    assert.deepStrictEqual(found, [])
  })

  it("every pattern compiles as ECMAScript with and without the u flag", () => {
    const failed: Array<string> = []
    for (const pattern of patterns) {
      for (const flags of ["", "u"]) {
        try {
          new RegExp(pattern, flags)
        } catch (error) {
          failed.push(`${pattern} /${flags}: ${String(error)}`)
        }
      }
    }
    assert.deepStrictEqual(failed, [])
  })

  it.skipIf(python === undefined)("every pattern compiles with Python's re (warnings as errors)", () => {
    const failed = runPython(
      `import json, re, sys
out = []
for p in json.load(sys.stdin):
    try:
        re.compile(p)
    except Exception as e:
        out.append(p + ": " + str(e))
print(json.dumps(out))`,
      patterns
    )
    assert.deepStrictEqual(failed, [])
  })

  it.skipIf(python === undefined)(
    "ECMAScript (u) and Python's re.search agree on strings around each pattern's matches",
    () => {
      const cases: Array<readonly [string, string]> = []
      for (const pattern of patterns) {
        const full = new RegExp(pattern, "u")
        const generated = fc.sample(
          fc.stringMatching(new RegExp(pattern.replace(/\(\?[!=][^()]*\)/g, ""), "u")).filter((value) =>
            full.test(value)
          ),
          { numRuns: 6, seed: 7 }
        )
        for (const value of generated) {
          cases.push([pattern, value])
          const chars = [...value]
          for (const tricky of TRICKY) {
            for (const at of [0, Math.floor(chars.length / 2), chars.length - 1]) {
              if (chars.length === 0) continue
              cases.push([pattern, [...chars.slice(0, at), tricky, ...chars.slice(at + 1)].join("")])
            }
          }
        }
      }
      const python = runPython(
        `import json, re, sys
print(json.dumps([re.search(p, s) is not None for p, s in json.load(sys.stdin)]))`,
        cases
      ) as Array<boolean>
      const differ = cases.flatMap(([pattern, value], i) => {
        const ecma = new RegExp(pattern, "u").test(value)
        return ecma === python[i]
          ? []
          : [`${pattern} on ${JSON.stringify(value)}: ECMAScript ${ecma}, Python ${python[i]}`]
      })
      assert.deepStrictEqual(differ.slice(0, 20), [])
      assert.isAbove(cases.length, 1000)
    }
  )
})
