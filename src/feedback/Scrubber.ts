/**
 * Removes protected values from a correction before it is saved:
 * - anything in the shape of a credential svc issues, whoever it belongs
 *   to: API keys (`svc_` + 43 characters) and signing secrets (`whsec_` +
 *   43), by the rules in `SecretRules.ts`;
 * - the organization's known credentials: its API keys (also by the stored
 *   SHA-256 of every key, revoked ones included), the secret store's values (webhook signing secrets, collector header
 *   values; for a header value like `Bearer <token>` the token alone too),
 *   whole or embedded in a longer string;
 * - recognizable secrets: the ruleset in `SecretRules.ts`.
 *
 * Only the secret substring is replaced, by `REDACTION_MARKER`. Object keys
 * are scanned like values (a secret used as a key is still a secret); a key
 * NAME such as `token` or `password_hint` never triggers removal by itself,
 * but a rule that knows a secret by its name sees a member's name and its
 * string value together (`{"aws_secret_access_key": "<key>"}`).
 * The result lists the JSON paths of the changed strings, never the values.
 */
import { KEY_PATTERN, KEY_PREFIX } from "../identity/KeyFormat.ts"
import { sha256Hex } from "../platform/Digest.ts"
import { urlCredentials, urlNeedles, valueNeedles } from "../secrets/Masking.ts"
import { appendPath } from "../tasks/SchemaCompiler.ts"
import { type Range, scanPatterns, scanSecretlint } from "./SecretRules.ts"

export const REDACTION_MARKER = "[REDACTED]"

/** Known values shorter than this are ignored: they would remove ordinary text. */
const MIN_KNOWN_VALUE_LENGTH = 8

export type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

export interface KnownCredentials {
  /** SHA-256 (hex) of every API key of the organization. */
  readonly keyHashes: ReadonlySet<string>
  /** Plain secret values of the organization (signing secrets, header values). */
  readonly values: ReadonlyArray<string>
}

export interface ScrubResult {
  readonly value: Json
  /** JSON paths (rooted at `root`) of every string that changed, in document order. */
  readonly fields: ReadonlyArray<string>
  /** Paths of objects where two keys became the same after redaction. */
  readonly collisions: ReadonlyArray<string>
}

/** Parts of a receiver URL shorter than this are not looked for alone (`/v1/traces` is ordinary text). */
const MIN_URL_PART_LENGTH = 16

/**
 * The literal values to look for: each value, the credential after an auth
 * scheme, and for a receiver URL (https or a broker's) its long parts
 * (path, query, query values, path segments: where hooks carry their token;
 * a broker's credentials, from `MIN_KNOWN_VALUE_LENGTH` like every known
 * value) and the URL without scheme.
 */
export const knownNeedles = (values: ReadonlyArray<string>): ReadonlyArray<string> => {
  const needles = new Set<string>()
  for (const value of values) {
    for (const needle of valueNeedles(value, MIN_KNOWN_VALUE_LENGTH)) needles.add(needle)
    if (/^(https|amqps?|nats|tls):\/\//i.test(value)) {
      for (const needle of urlNeedles(value, MIN_URL_PART_LENGTH)) needles.add(needle)
      // A broker's password or token is a known value like any other: from 8 characters.
      for (const credential of urlCredentials(value)) {
        if (credential.length >= MIN_KNOWN_VALUE_LENGTH) needles.add(credential)
      }
    }
  }
  // Longest first, so a value that contains another is removed whole.
  return [...needles].sort((a, b) => b.length - a.length)
}

/** An API key: `svc_` + 43 base64url characters (`KEY_PATTERN`), tested on one candidate. */
const KEY_SHAPE = new RegExp(`^${KEY_PATTERN.source}$`)
const KEY_LENGTH = KEY_PREFIX.length + 43

const knownRanges = (text: string, needles: ReadonlyArray<string>, keyHashes: ReadonlySet<string>): Array<Range> => {
  const out: Array<Range> = []
  for (const needle of needles) {
    // Overlapping occurrences of one needle (`aaaa` in `aaaaaaa`, a value
    // that overlaps itself) extend one range: a range per occurrence could
    // be a million for one long string.
    let current: [number, number] | undefined
    for (let at = text.indexOf(needle); at >= 0; at = text.indexOf(needle, at + 1)) {
      if (current !== undefined && at <= current[1]) {
        current[1] = at + needle.length
      } else {
        current = [at, at + needle.length]
        out.push(current)
      }
    }
  }
  if (keyHashes.size > 0) {
    // Every `svc_` starts a candidate, overlapping ones included: in
    // `svc_<key>` a non-overlapping scan would take `svc_svc_...` as the
    // match and never test the key itself.
    for (let at = text.indexOf(KEY_PREFIX); at >= 0; at = text.indexOf(KEY_PREFIX, at + 1)) {
      const candidate = text.slice(at, at + KEY_LENGTH)
      if (KEY_SHAPE.test(candidate) && keyHashes.has(sha256Hex(candidate))) out.push([at, at + KEY_LENGTH])
    }
  }
  return out
}

/** Replaces the union of `ranges` in `text` by the marker (overlapping ranges merge). */
export const redactRanges = (text: string, ranges: ReadonlyArray<Range>): string => {
  if (ranges.length === 0) return text
  const sorted = [...ranges].sort((a, b) => a[0] - b[0])
  const merged: Array<[number, number]> = []
  for (const [start, end] of sorted) {
    const last = merged[merged.length - 1]
    if (last !== undefined && start <= last[1]) last[1] = Math.max(last[1], end)
    else merged.push([start, end])
  }
  let out = ""
  let at = 0
  for (const [start, end] of merged) {
    out += text.slice(at, start) + REDACTION_MARKER
    at = end
  }
  return out + text.slice(at)
}

/**
 * Every string of the document (keys and values), in a fixed traversal
 * order, and what joins each to the next in the text secretlint scans:
 * `MEMBER` between a member's name and its string value, `SEPARATOR`
 * elsewhere.
 */
const collectStrings = (value: Json, out: Array<string>, glue: Array<string>): void => {
  if (typeof value === "string") {
    out.push(value)
    glue.push(SEPARATOR)
  } else if (Array.isArray(value)) {
    for (const item of value) collectStrings(item, out, glue)
  } else if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) {
      out.push(key)
      glue.push(typeof item === "string" ? MEMBER : SEPARATOR)
      collectStrings(item, out, glue)
    }
  }
}

// Strings are scanned by secretlint in one pass, joined by a separator no
// rule matches across; findings are then split back per string.
const SEPARATOR = "\n\n"
// A member's name and its string value are joined as YAML writes them, so
// the rules that know a secret by its name (`aws_secret_access_key: <key>`)
// see it in `{"aws_secret_access_key": "<key>"}` too.
const MEMBER = ": "

export const scrub = async (document: Json, known: KnownCredentials, root = ""): Promise<ScrubResult> => {
  const strings: Array<string> = []
  const glue: Array<string> = []
  collectStrings(document, strings, glue)
  if (strings.length === 0) return { value: document, fields: [], collisions: [] }

  const ranges: Array<Array<Range>> = strings.map(() => [])
  const starts: Array<number> = []
  const parts: Array<string> = []
  let offset = 0
  strings.forEach((text, i) => {
    starts.push(offset)
    parts.push(text, glue[i]!)
    offset += text.length + glue[i]!.length
  })
  const joined = parts.join("")
  // Both rule sets read the joined text: a member's name and value together.
  for (const finding of [...(await scanSecretlint(joined)), ...scanPatterns(joined)]) {
    const [start, end] = finding.range
    // Findings rarely span strings; clip each to the strings it touches,
    // from the last string starting at or before it (a binary search: a
    // document may hold many strings and many findings).
    let low = 0
    let high = strings.length - 1
    while (low < high) {
      const middle = (low + high + 1) >> 1
      if (starts[middle]! <= start) low = middle
      else high = middle - 1
    }
    for (let i = low; i < strings.length; i++) {
      const s = starts[i]!
      const e = s + strings[i]!.length
      if (end <= s) break
      if (start >= e) continue
      ranges[i]!.push([Math.max(start, s) - s, Math.min(end, e) - s])
    }
  }
  const needles = knownNeedles(known.values)
  let found = false
  strings.forEach((text, i) => {
    // One push per range, never `push(...ranges)`: spreading a long list
    // into arguments throws a RangeError.
    for (const range of knownRanges(text, needles, known.keyHashes)) ranges[i]!.push(range)
    if (ranges[i]!.length > 0) found = true
  })
  // Nothing to remove (the usual case): the document as it came.
  if (!found) return { value: document, fields: [], collisions: [] }

  const fields: Array<string> = []
  const collisions: Array<string> = []
  let index = 0
  const next = () => {
    const i = index++
    const original = strings[i]!
    const redacted = redactRanges(original, ranges[i]!)
    return { redacted, changed: redacted !== original }
  }
  const rebuild = (value: Json, path: string): Json => {
    if (typeof value === "string") {
      const { redacted, changed } = next()
      if (changed) fields.push(path)
      return redacted
    }
    if (Array.isArray(value)) return value.map((item, i) => rebuild(item, appendPath(path, i)))
    if (value !== null && typeof value === "object") {
      const out: Record<string, Json> = {}
      for (const item of Object.values(value)) {
        const { redacted: name, changed } = next()
        const itemPath = appendPath(path, name)
        if (changed) fields.push(itemPath)
        if (Object.hasOwn(out, name)) collisions.push(path)
        // defineProperty: a `__proto__` member stays a plain member.
        Object.defineProperty(out, name, {
          value: rebuild(item, itemPath),
          enumerable: true,
          writable: true,
          configurable: true
        })
      }
      return out
    }
    return value
  }
  const value = rebuild(document, root)
  return { value, fields: [...new Set(fields)], collisions: [...new Set(collisions)] }
}
