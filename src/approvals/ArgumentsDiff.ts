/**
 * What an edit changed, and the digest of the approved arguments: pure
 * functions, run in the rule workers (`rule-worker.ts`) under a deadline
 * and a heap, and loading no Effect (a worker's modules never do).
 *
 * `arguments_changed` is bounded: at most `MAX_CHANGED_POINTERS` pointers
 * of at most `MAX_CHANGED_CHARACTERS` characters in all. A longer diff
 * collapses rather than grows: to the top-level members (or items) that
 * differ when those fit, else to `[""]`, the whole value. The final
 * arguments are carried whole beside it, so nothing is lost but precision.
 */
import { sha256Hex } from "../platform/Digest.ts"

type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

/** The most pointers `arguments_changed` lists. */
export const MAX_CHANGED_POINTERS = 100
/** The most characters its pointers hold together. */
export const MAX_CHANGED_CHARACTERS = 8192

/** JSON text with object members sorted by name and no whitespace: the digest's input. */
export const canonicalJson = (value: Json): string => {
  if (value === null || typeof value !== "object") return JSON.stringify(value)
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  const object = value as { readonly [key: string]: Json }
  return `{${
    Object.keys(object).sort().map((key) => `${JSON.stringify(key)}:${canonicalJson(object[key]!)}`).join(",")
  }}`
}

/** The digest the step's outcome must carry: SHA-256 of `canonicalJson`, lowercase hex. */
export const argumentsDigest = (value: Json) => sha256Hex(canonicalJson(value))

const pointer = (base: string, segment: string | number) =>
  `${base}/${String(segment).replaceAll("~", "~0").replaceAll("/", "~1")}`

const isObject = (v: Json): v is { readonly [key: string]: Json } =>
  typeof v === "object" && v !== null && !Array.isArray(v)

type Visit = (segment: string | number, before: Json | undefined, after: Json | undefined) => boolean

/**
 * Visits the members (sorted by name) or items of two containers of one
 * kind, until `visit` answers false; undefined when they are not two
 * containers of one kind. Nothing is allocated per item.
 */
const eachChild = (before: Json, after: Json, visit: Visit): boolean | undefined => {
  if (Array.isArray(before) && Array.isArray(after)) {
    const a = before as ReadonlyArray<Json>
    const b = after as ReadonlyArray<Json>
    for (let i = 0; i < Math.max(a.length, b.length); i++) if (!visit(i, a[i], b[i])) return false
    return true
  }
  if (isObject(before) && isObject(after)) {
    for (const key of [...new Set([...Object.keys(before), ...Object.keys(after)])].sort()) {
      if (
        !visit(
          key,
          Object.hasOwn(before, key) ? before[key] : undefined,
          Object.hasOwn(after, key) ? after[key] : undefined
        )
      ) return false
    }
    return true
  }
  return undefined
}

/** Whether two JSON values are equal (member order aside). Recursive: request values nest at most 64 levels. */
const same = (a: Json, b: Json): boolean =>
  a === b || eachChild(a, b, (_, x, y) => x !== undefined && y !== undefined && same(x, y)) === true

/** Adds what `after` changed of `before` to `out`; false as soon as the bounds are passed. */
const walk = (before: Json, after: Json, at: string, out: Array<string>, used: { characters: number }): boolean => {
  const add = (pointerText: string) => {
    out.push(pointerText)
    used.characters += pointerText.length
    return out.length <= MAX_CHANGED_POINTERS && used.characters <= MAX_CHANGED_CHARACTERS
  }
  const walked = eachChild(
    before,
    after,
    (segment, b, a) =>
      b === undefined || a === undefined
        ? add(pointer(at, segment))
        : b === a || walk(b, a, pointer(at, segment), out, used)
  )
  return walked ?? (before === after || add(at))
}

/**
 * What `after` changed of `before`, as JSON Pointers (RFC 6901): each
 * member or item added, removed or replaced, the deepest that differs
 * (objects and arrays are compared member by member, item by item), within
 * the bounds above; past them, the top-level members or items that differ,
 * or `[""]`.
 */
export const changedPointers = (before: Json, after: Json): Array<string> => {
  const out: Array<string> = []
  if (walk(before, after, "", out, { characters: 0 })) return out
  const top: Array<string> = []
  let characters = 0
  const fits = eachChild(before, after, (segment, b, a) => {
    if (b !== undefined && a !== undefined && same(b, a)) return true
    top.push(pointer("", segment))
    characters += top[top.length - 1]!.length
    return top.length <= MAX_CHANGED_POINTERS && characters <= MAX_CHANGED_CHARACTERS
  })
  return fits === true && top.length > 0 ? top : [""]
}
