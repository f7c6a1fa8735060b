import { assert, describe, it } from "@effect/vitest"
import { REDACTION_MARKER, scrub } from "../../../src/feedback/Scrubber.ts"
import { patternRules, scanText } from "../../../src/feedback/SecretRules.ts"
import { ordinaryStrings, secretSamples } from "../../support/secretSamples.ts"

const none = { keyHashes: new Set<string>(), values: [] }

describe("the secret ruleset: each rule has a true and a false positive", () => {
  for (const sample of secretSamples()) {
    it(`${sample.rule}: finds ${sample.rule.replace("@secretlint/secretlint-rule-", "")} and removes only the secret`, async () => {
      const findings = await scanText(sample.text)
      assert.include(findings.map((f) => f.ruleId), sample.rule)
      const { value, fields } = await scrub({ answer: sample.text }, none)
      const text = (value as { answer: string }).answer
      assert.notInclude(text, sample.secret)
      assert.include(text, REDACTION_MARKER)
      assert.deepStrictEqual(fields, ["answer"])
    })

    it(`${sample.rule}: leaves the look-alike ${JSON.stringify(sample.lookalike)} alone`, async () => {
      const findings = await scanText(sample.lookalike)
      assert.deepStrictEqual(findings, [])
      const { value, fields } = await scrub({ answer: sample.lookalike }, none)
      assert.deepStrictEqual(value, { answer: sample.lookalike })
      assert.deepStrictEqual(fields, [])
    })
  }

  it("every hand-written rule has a sample", () => {
    const covered = new Set(secretSamples().map((s) => s.rule))
    for (const rule of patternRules) assert.isTrue(covered.has(rule.id), `${rule.id} has no sample`)
  })

  it("ordinary text is never touched", async () => {
    for (const text of ordinaryStrings) assert.deepStrictEqual(await scanText(text), [], text)
  })

  it("a secretlint-disable comment in the correction does not switch the scanner off", async () => {
    const sample = secretSamples().find((s) => s.rule === "@secretlint/secretlint-rule-github")!
    const { value } = await scrub({ a: "// secretlint-disable", b: sample.text }, none)
    assert.notInclude(JSON.stringify(value), sample.secret)
  })
})
