import { assert, describe, it } from "@effect/vitest"
import { lintSource } from "@secretlint/core"
import { rules as presetRules } from "@secretlint/secretlint-rule-preset-recommend"
import fc from "fast-check"
import { regexKeywords } from "../../../src/feedback/SecretKeywords.ts"
import {
  deriveKeywords,
  OTHER_FILE_TYPES,
  patternRules,
  SCAN_FILE_PATH,
  scanSecretlint,
  scanSecretlintUnfiltered,
  scanText,
  secretlintRulesFor
} from "../../../src/feedback/SecretRules.ts"
import { chars, ordinaryStrings, secretSamples } from "../../support/secretSamples.ts"

const SECRETLINT = "@secretlint/"

describe("secretlint's keyword prefilter is derived from the rules and sound", () => {
  it("every sample secret of every seed is still caught, with exactly the findings of the unfiltered preset", async () => {
    for (const seed of [7, 11, 23, 42, 99]) {
      for (const sample of secretSamples(seed)) {
        for (
          const text of [
            sample.text,
            sample.text.toUpperCase() === sample.text ? sample.text : sample.text,
            `${sample.lookalike}\n\n${sample.text}`
          ]
        ) {
          const unfiltered = await scanSecretlintUnfiltered(text)
          const filtered = await scanSecretlint(text)
          assert.deepStrictEqual(filtered, unfiltered, `${sample.rule} (seed ${seed})`)
          if (sample.rule.startsWith(SECRETLINT)) {
            assert.include(filtered.map((f) => f.ruleId), sample.rule, `${sample.rule} (seed ${seed})`)
          }
        }
      }
    }
  })

  it("ordinary text runs no secretlint rule", async () => {
    const derived = await deriveKeywords()
    const always = derived.filter((rule) => rule.keywords === undefined).map((rule) => rule.id)
    // Keywords come from every rule that looks at text files; the GCP rule
    // has none (it reads .json and .p12 files alone) and never runs.
    assert.deepStrictEqual(always.filter((id) => !OTHER_FILE_TYPES.has(id)), [])
    // (A URL runs the basic-auth and connection-string rules, "https://"
    // being a keyword of theirs; "AKIA" runs the AWS rule.)
    for (const text of ordinaryStrings.filter((t) => !t.includes("://") && t !== "AKIA")) {
      assert.deepStrictEqual(await secretlintRulesFor(text), [], text)
    }
    assert.isAbove(derived.length, 20)
  })

  it("the rules left out read other file types: they find nothing in our text, what they look for is still caught", async () => {
    // A GCP service account key as a user might paste it into a correction.
    const key = JSON.stringify({
      type: "service_account",
      project_id: "demo",
      private_key_id: chars("0123456789abcdef", 40),
      private_key: secretSamples().find((s) => s.rule === "@secretlint/secretlint-rule-privatekey")!.secret,
      client_email: "demo@demo.iam.gserviceaccount.com"
    })
    const gcp = presetRules.find((rule) => rule.meta.id === "@secretlint/secretlint-rule-gcp")!
    const run = async (source: { readonly filePath: string; readonly ext?: string }) =>
      (await lintSource({
        source: { content: key, ...source, contentType: "text" },
        options: { config: { rules: [{ id: gcp.meta.id, rule: gcp as never }] }, noPhysicFilePath: true }
      })).messages
    assert.deepStrictEqual([...OTHER_FILE_TYPES], [gcp.meta.id])
    // The text is what the rule looks for, in a .json file; in ours (whose
    // type secretlint is not told) it finds nothing.
    assert.lengthOf(await run({ filePath: "/key.json", ext: ".json" }), 1)
    assert.deepStrictEqual(await run({ filePath: SCAN_FILE_PATH }), [])
    // The private key inside is still found.
    const found = (await scanText(key)).map((f) => f.ruleId)
    assert.include(found, "@secretlint/secretlint-rule-privatekey")
  })

  it("a text holding a rule's keyword runs that rule", async () => {
    const github = secretSamples().find((s) => s.rule === "@secretlint/secretlint-rule-github")!
    assert.include(await secretlintRulesFor(github.text), "@secretlint/secretlint-rule-github")
    assert.notInclude(await secretlintRulesFor(github.text), "@secretlint/secretlint-rule-stripe")
  })
})

describe("regexKeywords: every match contains one of the keywords", () => {
  it("literals, alternations, optional parts and classes", () => {
    assert.deepStrictEqual([...regexKeywords(/ghp_[A-Za-z0-9]{36}/)!], ["ghp_"])
    assert.deepStrictEqual(new Set(regexKeywords(/\b(?:sk|rk)_live_\w+/)!), new Set(["sk_live_", "rk_live_"]))
    assert.deepStrictEqual([...regexKeywords(/AKIA[A-Z0-9]{16}/)!], ["akia"])
    assert.strictEqual(regexKeywords(/[A-Za-z0-9]{40}/), undefined)
    assert.strictEqual(regexKeywords(/(?:abc)?\d+/), undefined)
    assert.strictEqual(regexKeywords(/abc|\d+/), undefined)
    assert.strictEqual(regexKeywords(/(.)\1/), undefined)
    assert.deepStrictEqual(
      [...regexKeywords(/x(?:ab|CD){2}y?z/i)!].sort(),
      ["xababyz", "xababz", "xabcdyz", "xabcdz", "xcdabyz", "xcdabz", "xcdcdyz", "xcdcdz"]
    )
  })

  // The expressions of our own rules plus a few shapes the analysis must bound.
  const expressions = [
    ...patternRules.map((rule) => rule.pattern),
    /\b(A3T[A-Z0-9]|AKIA|AGPA)[A-Z0-9]{16}\b/,
    /["']?(?:AWS|aws|Aws)?_?(?:SECRET|secret|Secret)_?(?:ACCESS|access|Access)_?(?:KEY|key|Key)["']?\s*(?::|=>|=)\s*["']?([A-Za-z0-9/+=]{40})/,
    /-----BEGIN[ ]?(?:(?:RSA|DSA|EC) )?PRIVATE KEY(?: BLOCK)?-----/,
    /x(?:ab|cd){2}y?z/,
    /(?:mongodb(?:\+srv)?|postgres(?:ql)?):\/\/[^:]+:[^@]+@/
  ]
  for (const regex of expressions) {
    it(`property: strings matching ${regex.source.slice(0, 50)} contain a keyword`, () => {
      const keywords = regexKeywords(regex)
      if (keywords === undefined) return
      // fast-check generates neither assertions nor case-insensitive
      // matches: drop the assertions (the analysis ignores them, so the
      // keywords are the same) and generate the upper-case spelling the
      // case-insensitive rules are written in.
      const source = regex.source.replace(/\\b/g, "").replace(/\(\?<?[!=][^)]*\)/g, "")
      const whole = new RegExp(source, regex.flags.replace(/[gi]/g, ""))
      fc.assert(
        fc.property(fc.stringMatching(whole), (text) => {
          const lower = text.toLowerCase()
          return [...keywords].some((keyword) => lower.includes(keyword))
        }),
        { numRuns: 300 }
      )
    })
  }
})
