/**
 * The scrubber removes the whole secret: each recognizable kind, planted in
 * its forms and in the surroundings people paste text into, leaves no
 * 12-character window of the secret behind, in a correction (a string, a
 * member value, a member of a nested document), a decision reason and a
 * decision's response alike.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fc from "fast-check"
import { scrubReason, scrubResponse } from "../../../src/approvals/Reasons.ts"
import { type Json, scrub } from "../../../src/feedback/Scrubber.ts"
import {
  awsSecretEndings,
  type Planting,
  plantings,
  surroundings,
  survivingWindows
} from "../../support/secretSamples.ts"

const NOTHING_KNOWN = { keyHashes: new Set<string>(), values: [] }

/** The places a text reaches the scrubber, each giving back what would be stored. */
const places: ReadonlyArray<readonly [string, (text: string) => Promise<string>]> = [
  ["a correction that is the string", async (text) => JSON.stringify((await scrub(text, NOTHING_KNOWN)).value)],
  [
    "a correction member",
    async (text) => JSON.stringify((await scrub({ answer: { note: text } }, NOTHING_KNOWN)).value)
  ],
  ["a decision reason", (text) => Effect.runPromise(scrubReason(text))],
  ["a decision's response", async (text) => JSON.stringify(await Effect.runPromise(scrubResponse({ message: text })))]
]

const leaks = async (planting: Planting, form: string, surround: (form: string) => string) => {
  const text = surround(form)
  const out: Array<string> = []
  for (const [place, store] of places) {
    const stored = await store(text)
    // A JSON string escapes `/`-free but does escape newlines and quotes: look in what is stored and in its decoding.
    const windows = survivingWindows(stored, planting.secret).concat(
      survivingWindows(stored.replaceAll("\\n", "\n"), planting.secret)
    )
    if (windows.length > 0) out.push(`${planting.rule} in ${JSON.stringify(text)} as ${place}: ${stored}`)
  }
  return out
}

describe("no 12-character window of a recognizable secret survives", () => {
  it("every kind, in every form of it, in every surrounding, in corrections, reasons and responses", async () => {
    const failures: Array<string> = []
    for (const planting of [...plantings(), ...awsSecretEndings()]) {
      for (const form of planting.forms) {
        for (const surround of surroundings) failures.push(...(await leaks(planting, form, surround)))
      }
    }
    assert.deepStrictEqual(failures.slice(0, 8), [], `${failures.length} leaks`)
  }, 120_000)

  it("property: any seed, kind, form and surrounding, and a member holding the form under its own name", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.nat(),
        fc.nat(),
        fc.constantFrom(...surroundings),
        async (seed, kind, formIndex, surround) => {
          const all = plantings(seed)
          const planting = all[kind % all.length]!
          const form = planting.forms[formIndex % planting.forms.length]!
          assert.deepStrictEqual(await leaks(planting, form, surround), [])
        }
      ),
      { numRuns: 150 }
    )
  }, 120_000)

  it("what a rule reports goes whole and alone, whatever range the rule gave with it", async () => {
    for (const planting of [...awsSecretEndings().slice(0, 1), ...plantings().filter((p) => p.forms.length > 4)]) {
      for (const form of planting.forms) {
        const { value } = await scrub({ line: form }, NOTHING_KNOWN)
        assert.deepStrictEqual(value, { line: form.replace(planting.secret, "[REDACTED]") })
      }
    }
  })

  it("an AWS secret access key as a JSON member's value, named by its member, in a correction", async () => {
    for (const planting of [...plantings().filter((p) => p.forms.length > 4), ...awsSecretEndings()]) {
      for (const name of ["aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", "SecretAccessKey"]) {
        const document: Json = { credentials: { aws_access_key_id: "ASIAEXAMPLE", [name]: planting.secret } }
        const stored = JSON.stringify((await scrub(document, NOTHING_KNOWN)).value)
        assert.deepStrictEqual(survivingWindows(stored, planting.secret), [], stored)
        assert.include(stored, name)
      }
    }
  })
})
