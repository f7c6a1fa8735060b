/**
 * Which of a fixed set of keywords a text holds, in one pass over the text,
 * case-insensitively: keyword `k` (lower-case ASCII) is found in `text`
 * exactly when `text.toLowerCase().includes(k)`.
 *
 * The secret rules' prefilters ask this of every correction for about a
 * hundred keywords; one `includes` per keyword scanned the text a hundred
 * times (about 20 µs for a 500-character correction, most of the scrub's
 * time for ordinary text). Here the keywords make an Aho-Corasick automaton,
 * unrolled into a table over the characters the keywords use (any other
 * character leads back to the start).
 *
 * Written here, not taken from npm: the maintained package tried
 * (modern-ahocorasick 3.3) matches by Unicode grapheme and allocates per
 * match; on the bench's 626-character correction it took 16-28 µs, more than
 * the hundred `includes` it would replace (21 µs), where this table takes
 * 2.4 µs. `test/unit/feedback/keyword-scan.test.ts` checks it against
 * `includes` by property.
 */

/** An automaton for `keywords` (non-empty, lower-case ASCII). */
export const keywordScan = (keywords: Iterable<string>) => {
  const unique = [...new Set(keywords)]
  // Symbol 0 is every character no keyword uses.
  const symbolOf = new Uint8Array(128)
  let width = 1
  for (const keyword of unique) {
    if (keyword === "" || keyword !== keyword.toLowerCase() || !/^[\x00-\x7f]+$/.test(keyword)) {
      throw new Error(`keywords are non-empty lower-case ASCII: ${JSON.stringify(keyword)}`)
    }
    for (let i = 0; i < keyword.length; i++) {
      const code = keyword.charCodeAt(i)
      if (symbolOf[code] === 0) symbolOf[code] = width++
    }
  }

  // The trie, a row of `width` transitions per state (0: none; state 0 is
  // the root, never a child), made into the automaton below.
  const trie: Array<number> = new Array(width).fill(0)
  const found: Array<Array<string> | undefined> = [undefined]
  for (const keyword of unique) {
    let at = 0
    for (let i = 0; i < keyword.length; i++) {
      const cell = at * width + symbolOf[keyword.charCodeAt(i)]!
      if (trie[cell] === 0) {
        trie[cell] = found.length
        found.push(undefined)
        trie.push(...new Array<number>(width).fill(0))
      }
      at = trie[cell]!
    }
    found[at] = [...(found[at] ?? []), keyword]
  }

  // Breadth first: each state's failure (longest proper suffix that is a
  // trie state) is done before it, so its transitions can be copied. A
  // state's own row still holds its trie children until it is done.
  const table = Int32Array.from(trie)
  const fail = new Int32Array(found.length)
  const queue = [...table.subarray(0, width)].filter((child) => child !== 0)
  for (let head = 0; head < queue.length; head++) {
    const state = queue[head]!
    const failure = fail[state]!
    const inherited = found[failure]
    if (inherited !== undefined) found[state] = [...(found[state] ?? []), ...inherited]
    for (let symbol = 1; symbol < width; symbol++) {
      const cell = state * width + symbol
      const child = table[cell]!
      const viaFailure = table[failure * width + symbol]!
      if (child === 0) {
        table[cell] = viaFailure
      } else {
        fail[child] = viaFailure
        queue.push(child)
      }
    }
  }

  return {
    /** The keywords (as given, lower-case) that `text` holds, ignoring case. */
    present: (text: string): ReadonlySet<string> => {
      const out = new Set<string>()
      const lower = text.toLowerCase()
      let state = 0
      for (let i = 0; i < lower.length; i++) {
        const code = lower.charCodeAt(i)
        state = table[state * width + (code < 128 ? symbolOf[code]! : 0)]!
        const here = found[state]
        if (here !== undefined) { for (const keyword of here) out.add(keyword) }
      }
      return out
    }
  }
}
