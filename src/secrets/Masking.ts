/**
 * Masking values svc protects (collector header values, receiver URLs) in
 * text that came from elsewhere and is kept or shown: a collector's or a
 * receiver's answer echoing what it was sent ends up in a delivery's
 * warning, error or response snippet, which the API lists.
 */

export const MASK = "[redacted]"

/** Shortest needle masked: shorter ones would mask ordinary text. */
const MIN_NEEDLE_LENGTH = 4

/**
 * The literal values to look for in a secret `value`: the value, and for an
 * `Authorization`-style value (`Bearer <token>`, `Basic <credential>`) the
 * credential after its scheme, alone: a collector that echoes the token it
 * was sent echoes it without the scheme.
 */
export const valueNeedles = (value: string, min = MIN_NEEDLE_LENGTH): Array<string> => {
  const out: Array<string> = []
  if (value.length >= min) out.push(value)
  const scheme = /^[A-Za-z][A-Za-z0-9_-]*\s+(\S.*)$/.exec(value)
  if (scheme?.[1] !== undefined && scheme[1].length >= min) out.push(scheme[1])
  return out
}

const decodeURIComponentSafe = (part: string) => {
  try {
    return decodeURIComponent(part)
  } catch {
    return part
  }
}

/**
 * The parts of a receiver URL that may carry a credential (chat and
 * automation hooks put their token in the path or the query): the whole
 * URL, without its scheme too, its path and query, the query alone, each
 * query value and each long path segment, and a broker URL's user name and
 * password.
 */
export const urlNeedles = (raw: string, min = MIN_NEEDLE_LENGTH): Array<string> => {
  const out = new Set<string>([raw])
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return [raw]
  }
  out.add(raw.replace(/^[a-z][a-z0-9+.-]*:\/\//i, ""))
  if (url.pathname !== "/" || url.search !== "") out.add(url.pathname + url.search)
  if (url.search.length > 1) out.add(url.search.slice(1))
  for (const value of url.searchParams.values()) out.add(value)
  for (const segment of url.pathname.split("/")) if (segment.length >= 8) out.add(segment)
  for (const part of urlCredentials(raw)) out.add(part)
  return [...out].filter((needle) => needle.length >= min)
}

/** A broker URL's user name and password, decoded (https receiver URLs have none); a NATS token is the user name. */
export const urlCredentials = (raw: string): Array<string> => {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return []
  }
  return [url.username, url.password].filter((part) => part !== "").map(decodeURIComponentSafe)
}

/** Longest scheme `maskUserinfo` recognises before a `://`. */
const MAX_SCHEME = 32

const isSchemeChar = (code: number) =>
  (code >= 97 && code <= 122) || (code >= 65 && code <= 90) || (code >= 48 && code <= 57) || code === 43 ||
  code === 45 ||
  code === 46
const isLetter = (code: number) => (code >= 97 && code <= 122) || (code >= 65 && code <= 90)
/** White space as a regular expression's `\s` knows it. */
const isSpace = (code: number) =>
  (code >= 9 && code <= 13) || code === 32 || code === 0xa0 || code === 0x1680 || (code >= 0x2000 && code <= 0x200a) ||
  code === 0x2028 || code === 0x2029 || code === 0x202f || code === 0x205f || code === 0x3000 || code === 0xfeff
/** Where user information ends: white space, `/`, `?`, `#` or `@`. */
const endsUserinfo = (code: number) => isSpace(code) || code === 47 || code === 63 || code === 35 || code === 64

/**
 * `text` with the user information of every URL in it (`scheme://user:password@`)
 * replaced by `MASK`, whatever its length: a broker's or a client library's
 * message may echo the URL it was given, and a password too short to be
 * searched for alone (`MIN_NEEDLE_LENGTH`) is still recognisable there.
 * With `cut`, `text` is the start of something longer: user information
 * still open at its end (no `@` yet) is masked too.
 *
 * A scan by hand, not a regular expression, because the text comes from
 * outside (a tenant's broker): each `://` looks back at most `MAX_SCHEME`
 * characters for its scheme and forward to the next white space, `/`, `?`,
 * `#` or `@`, and the next `://` starts with a `/`, so no character is read
 * more than a bounded number of times.
 */
export const maskUserinfo = (text: string, cut = false): string => {
  let out = ""
  let copied = 0
  for (let at = text.indexOf("://"); at >= 0; at = text.indexOf("://", at + 1)) {
    // A scheme: a letter, then scheme characters up to the `://`.
    let scheme = false
    for (let k = at - 1; k >= Math.max(0, at - MAX_SCHEME) && k >= copied && isSchemeChar(text.charCodeAt(k)); k--) {
      if (isLetter(text.charCodeAt(k))) {
        scheme = true
        break
      }
    }
    if (!scheme) continue
    const from = at + 3
    let end = from
    while (end < text.length && !endsUserinfo(text.charCodeAt(end))) end++
    if (end < text.length && text.charCodeAt(end) === 64) {
      out += text.slice(copied, from) + MASK
      copied = end
      at = end
    } else if (end === text.length && cut && end > from) {
      out += text.slice(copied, from) + MASK
      copied = end
      break
    }
  }
  return copied === 0 ? text : out + text.slice(copied)
}

/**
 * `text` with every occurrence of every needle replaced by `MASK`
 * (overlapping occurrences merge into one). With `cut`, `text` is the start
 * of something longer: a needle's beginning at its very end is masked too,
 * so a cut never leaves more than two characters of a secret behind.
 */
export const maskNeedles = (
  text: string,
  needles: ReadonlyArray<string>,
  options: { readonly cut?: boolean } = {}
): string => {
  const ranges: Array<[number, number]> = []
  for (const needle of needles) {
    if (needle === "") continue
    // Overlapping occurrences of one needle extend one range (not one each).
    let current: [number, number] | undefined
    for (let at = text.indexOf(needle); at >= 0; at = text.indexOf(needle, at + 1)) {
      if (current !== undefined && at <= current[1]) current[1] = at + needle.length
      else ranges.push(current = [at, at + needle.length])
    }
    if (options.cut === true) {
      // (Two characters or fewer of a secret tell nothing.)
      for (let k = Math.min(needle.length - 1, text.length); k >= 3; k--) {
        if (text.endsWith(needle.slice(0, k))) {
          ranges.push([text.length - k, text.length])
          break
        }
      }
    }
  }
  if (ranges.length === 0) return text
  ranges.sort((a, b) => a[0] - b[0])
  let out = ""
  let at = 0
  let open: [number, number] | undefined
  for (const range of ranges) {
    if (open !== undefined && range[0] <= open[1]) {
      open[1] = Math.max(open[1], range[1])
      continue
    }
    if (open !== undefined) {
      out += text.slice(at, open[0]) + MASK
      at = open[1]
    }
    open = [range[0], range[1]]
  }
  out += text.slice(at, open![0]) + MASK
  return out + text.slice(open![1])
}

/**
 * The most characters of text from outside svc kept or scanned: a broker's
 * error or acknowledgement, a collector's message, the start of a
 * receiver's answer. Longer text is cut here, and marked `…`, before
 * anything reads it.
 */
export const MAX_OUTSIDE_TEXT = 1024

/** `text` cut to `MAX_OUTSIDE_TEXT` characters (never inside a surrogate pair); `cut` tells whether it was. */
export const cutOutside = (text: string): { readonly text: string; readonly cut: boolean } => {
  if (text.length <= MAX_OUTSIDE_TEXT) return { text, cut: false }
  const last = text.charCodeAt(MAX_OUTSIDE_TEXT - 1)
  return { text: text.slice(0, last >= 0xd800 && last <= 0xdbff ? MAX_OUTSIDE_TEXT - 1 : MAX_OUTSIDE_TEXT), cut: true }
}

/**
 * The one way text from outside (brokers, collectors, receivers) is kept:
 * cut to `MAX_OUTSIDE_TEXT` first, then URL user information and every
 * needle masked (`cut`: `text` is already the start of something longer),
 * ending with `…` when anything was cut: at most `MAX_OUTSIDE_TEXT` + 1
 * characters.
 */
export const fromOutside = (
  text: string,
  needles: ReadonlyArray<string> = [],
  options: { readonly cut?: boolean } = {}
): string => {
  const bounded = cutOutside(text)
  const cut = bounded.cut || options.cut === true
  const masked = maskNeedles(maskUserinfo(bounded.text, cut), needles, { cut })
  // A mask may be longer than what it hides: cut again, what is left is masked already.
  if (masked.length > MAX_OUTSIDE_TEXT) return `${cutOutside(masked).text}…`
  return cut ? `${masked}…` : masked
}
