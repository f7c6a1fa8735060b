/**
 * Keywords derived from regular expressions: a set of strings such that
 * every match of the expression contains at least one of them (compared
 * lower-cased on both sides). Text holding none of them cannot match, so a
 * scanner may skip it; that is what makes a keyword prefilter sound.
 *
 * The analysis is conservative: whatever it cannot bound (a wide character
 * class, a backreference, an optional part, a non-ASCII letter under case
 * folding) contributes no keyword, and an expression whose every match need
 * not contain any fixed string has no keyword set at all (`undefined`): a
 * prefilter must then let every text through.
 */
import { type AST, parseRegExpLiteral } from "@eslint-community/regexpp"

/** Largest finite set of strings an element may stand for before it is treated as open. */
const MAX_EXACT = 64
/** Largest character class spelled out as single characters. */
const MAX_CLASS = 16

interface Facts {
  /** Every string the node can match (lower-cased), when few; else undefined. */
  readonly exact: ReadonlySet<string> | undefined
  /** Strings one of which every match contains (none empty); undefined when unknown. */
  readonly required: ReadonlySet<string> | undefined
}

const OPEN: Facts = { exact: undefined, required: undefined }
const EMPTY: Facts = { exact: new Set([""]), required: undefined }

const exactly = (strings: ReadonlySet<string>): Facts => ({
  exact: strings,
  required: [...strings].every((s) => s.length > 0) ? strings : undefined
})

const cross = (a: ReadonlySet<string>, b: ReadonlySet<string>): ReadonlySet<string> | undefined => {
  if (a.size * b.size > MAX_EXACT) return undefined
  const out = new Set<string>()
  for (const x of a) for (const y of b) out.add(x + y)
  return out
}

/** A keyword set's strength: its shortest keyword's length, then fewer keywords. */
const better = (a: ReadonlySet<string> | undefined, b: ReadonlySet<string> | undefined) => {
  if (a === undefined) return b
  if (b === undefined) return a
  const shortest = (s: ReadonlySet<string>) => Math.min(...[...s].map((k) => k.length))
  const [la, lb] = [shortest(a), shortest(b)]
  return la !== lb ? (la > lb ? a : b) : a.size <= b.size ? a : b
}

const nonEmpty = (set: ReadonlySet<string> | undefined) =>
  set !== undefined && set.size > 0 && [...set].every((s) => s.length > 0) ? set : undefined

const character = (value: number): string | undefined =>
  // Only ASCII is lower-cased the same way by `toLowerCase` and by a regex's case folding.
  value < 128 ? String.fromCharCode(value).toLowerCase() : undefined

const characterClass = (node: AST.CharacterClass): Facts => {
  if (node.negate) return OPEN
  const out = new Set<string>()
  for (const element of node.elements) {
    if (element.type === "Character") {
      const c = character(element.value)
      if (c === undefined) return OPEN
      out.add(c)
    } else if (element.type === "CharacterClassRange") {
      if (element.max.value - element.min.value >= MAX_CLASS * 2) return OPEN
      for (let v = element.min.value; v <= element.max.value; v++) {
        const c = character(v)
        if (c === undefined) return OPEN
        out.add(c)
      }
    } else {
      return OPEN
    }
    if (out.size > MAX_CLASS) return OPEN
  }
  return out.size === 0 ? OPEN : exactly(out)
}

const sequence = (elements: ReadonlyArray<AST.Element>): Facts => {
  let run: ReadonlySet<string> | undefined = new Set([""])
  let allExact = true
  let best: ReadonlySet<string> | undefined
  for (const element of elements) {
    const facts = node(element)
    if (facts.exact !== undefined) {
      const joined: ReadonlySet<string> | undefined = run === undefined ? undefined : cross(run, facts.exact)
      if (joined === undefined) {
        allExact = false
        best = better(best, nonEmpty(run))
        run = facts.exact
      } else {
        run = joined
      }
    } else {
      allExact = false
      best = better(best, better(nonEmpty(run), facts.required))
      run = new Set([""])
    }
  }
  best = better(best, nonEmpty(run))
  return allExact && run !== undefined ? exactly(run) : { exact: undefined, required: best }
}

const alternatives = (alts: ReadonlyArray<AST.Alternative>): Facts => {
  let exact: Set<string> | undefined = new Set()
  let required: Set<string> | undefined = new Set()
  for (const facts of alts.map((alt) => sequence(alt.elements))) {
    if (exact !== undefined && facts.exact !== undefined && exact.size + facts.exact.size <= MAX_EXACT) {
      for (const s of facts.exact) exact.add(s)
    } else {
      exact = undefined
    }
    if (required !== undefined && facts.required !== undefined) { for (const s of facts.required) required.add(s) }
    else required = undefined
  }
  if (exact !== undefined) return exactly(exact)
  return { exact: undefined, required: nonEmpty(required) }
}

const quantifier = (q: AST.Quantifier): Facts => {
  const inner = node(q.element)
  if (q.min === 0) {
    // Optional: it may match nothing, so it requires nothing (and `x*` and
    // the like are no fixed set of strings either).
    return q.max === 1 && inner.exact !== undefined && inner.exact.size < MAX_EXACT
      ? { exact: new Set([...inner.exact, ""]), required: undefined }
      : OPEN
  }
  if (q.min === q.max && inner.exact !== undefined) {
    let out: ReadonlySet<string> | undefined = new Set([""])
    for (let i = 0; i < q.min && out !== undefined; i++) out = cross(out, inner.exact)
    if (out !== undefined) return exactly(out)
  }
  return { exact: undefined, required: inner.required }
}

const node = (n: AST.Element): Facts => {
  switch (n.type) {
    case "Character": {
      const c = character(n.value)
      return c === undefined ? OPEN : exactly(new Set([c]))
    }
    case "CharacterClass":
      return characterClass(n)
    case "Assertion":
      // Anchors, word boundaries and lookarounds consume nothing.
      return EMPTY
    case "Group":
    case "CapturingGroup":
      return alternatives(n.alternatives)
    case "Quantifier":
      return quantifier(n)
    default:
      // Character sets (\d, \w, ., \p{...}), backreferences, class string
      // disjunctions, modifiers: no bound.
      return OPEN
  }
}

/** Keywords of one expression (lower-case), or undefined when a match need not contain any fixed string. */
export const regexKeywords = (regex: RegExp): ReadonlySet<string> | undefined => {
  let ast: AST.RegExpLiteral
  try {
    ast = parseRegExpLiteral(regex)
  } catch {
    return undefined
  }
  return alternatives(ast.pattern.alternatives).required
}
