/**
 * Shuffles in place from a seeded generator (Park-Miller), so that two runs
 * of a study, or its two arms, settle in the same order.
 */
export const seededShuffle = (seed = 1) => <A>(items: Array<A>): Array<A> => {
  for (let i = items.length - 1; i > 0; i--) {
    seed = (seed * 16807) % 2147483647
    const j = seed % (i + 1)
    ;[items[i], items[j]] = [items[j]!, items[i]!]
  }
  return items
}
