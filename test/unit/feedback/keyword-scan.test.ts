import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { keywordScan } from "../../../src/feedback/KeywordScan.ts"
import { deriveKeywords, patternRules } from "../../../src/feedback/SecretRules.ts"

/** The definition the scan must agree with: one `includes` per keyword on the lower-cased text. */
const naive = (keywords: ReadonlyArray<string>, text: string) => {
  const lower = text.toLowerCase()
  return new Set(keywords.filter((keyword) => lower.includes(keyword)))
}

describe("keywordScan finds exactly the keywords a text holds, ignoring case", () => {
  it("overlapping keywords, keywords inside others, suffixes that restart a match", () => {
    const keywords = ["he", "she", "his", "hers", "ushe", "aaa", "aab", "-----begin"]
    const scan = keywordScan(keywords)
    for (
      const text of ["ushers", "USHERS", "hishe", "aaaab", "aab", "x-----BEGIN y", "-----begi", "", "nothing here"]
    ) {
      assert.deepStrictEqual(scan.present(text), naive(keywords, text), text)
    }
  })

  it("property: the same set as one includes per keyword, for the secret rules' keywords", async () => {
    const keywords = [
      ...new Set([
        ...(await deriveKeywords()).flatMap((rule) => rule.keywords ?? []),
        ...patternRules.flatMap((rule) => rule.keywords)
      ])
    ]
    const scan = keywordScan(keywords)
    // Texts made of pieces of keywords (so near misses and overlaps are
    // common), in any case, with ordinary and non-ASCII text between them.
    const piece = fc.oneof(
      fc.constantFrom(...keywords).chain((k) =>
        fc.tuple(fc.nat(k.length), fc.nat(k.length)).map(([a, b]) => k.slice(Math.min(a, b), Math.max(a, b) + 1))
      ),
      fc.constantFrom(...keywords),
      fc.string({ maxLength: 6 }),
      fc.constantFrom("İ", "ß", "\u212a", " ", "\n\n", "_", "-")
    )
    const text = fc.array(fc.tuple(piece, fc.boolean()), { maxLength: 12 }).map((parts) =>
      parts.map(([part, upper]) => upper ? part.toUpperCase() : part).join("")
    )
    fc.assert(
      fc.property(text, (t) => {
        assert.deepStrictEqual(scan.present(t), naive(keywords, t))
      }),
      { numRuns: 2000 }
    )
  })

  it("refuses keywords it could never find", () => {
    assert.throws(() => keywordScan(["Upper"]))
    assert.throws(() => keywordScan([""]))
    assert.throws(() => keywordScan(["straße"]))
  })
})
