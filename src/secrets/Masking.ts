/**
 * Masking values svc protects (collector header values, receiver URLs) in
 * text that came from elsewhere and is kept or shown: a collector's or a
 * receiver's answer echoing what it was sent ends up in a delivery's
 * warning, error or response snippet, which the API lists.
 */

export const MASK = "[redacted]"

/** Shortest needle masked: shorter ones would mask ordinary text. */
export const MIN_NEEDLE_LENGTH = 4

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
  // A broker URL's credentials (https receiver URLs have none); a NATS token is the user name.
  for (const part of [url.username, url.password]) if (part !== "") out.add(decodeURIComponentSafe(part))
  return [...out].filter((needle) => needle.length >= min)
}

/**
 * A scheme (at most 32 characters: an unbounded one made the search
 * quadratic, 17 s for 160 KB of `a.a.a.`, and the text may come from a
 * tenant's broker), `://`, and user information up to its `@`. Each start
 * reads at most the scheme's 32 characters and then, past a `://`, up to
 * the next space, `/`, `?`, `#` or `@`, so the search stays linear in the
 * text.
 */
const USERINFO = /([a-z][a-z0-9+.-]{0,31}:\/\/)[^\s/?#@]*@/gi

/**
 * `text` with the user information of every URL in it (`scheme://user:password@`)
 * replaced by `MASK`, whatever its length: a broker's or a client library's
 * message may echo the URL it was given, and a password too short to be
 * searched for alone (`MIN_NEEDLE_LENGTH`) is still recognisable there.
 */
export const maskUserinfo = (text: string): string => text.replace(USERINFO, `$1${MASK}@`)

/**
 * `text` with every occurrence of every needle replaced by `MASK`
 * (overlapping occurrences merge into one). With `cut`, `text` is the start
 * of something longer: a needle's beginning at its very end is masked too,
 * so a cut never leaves more than two characters of a secret behind.
 */
export const maskNeedles = (text: string, needles: ReadonlyArray<string>, options: { readonly cut?: boolean } = {}): string => {
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
