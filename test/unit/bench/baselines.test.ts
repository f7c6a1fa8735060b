/**
 * The request baselines' registry (`bench/support/baselines.ts`; the
 * benchmark itself never runs in `npm test`): every baseline's script exists
 * and reads the options the harness gives it, no svc checkout can take a
 * baseline's label (its figures would be mixed with the baseline's), and
 * svc's CPU reads as a ratio of each baseline's.
 */
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import { afterEach, describe, expect, it } from "vitest"
import { armTitle, BASELINE_NAMES, BASELINES, cpuRatio } from "../../../bench/support/baselines.ts"
import { svcCheckouts } from "../../../bench/support/svc.ts"

const scriptOf = (name: keyof typeof BASELINES) =>
  fileURLToPath(new URL(BASELINES[name].script, new URL("../../../bench/support/", import.meta.url)))

describe("the request baselines", () => {
  const given = process.env.BENCH_SVC_DIR
  afterEach(() => {
    if (given === undefined) delete process.env.BENCH_SVC_DIR
    else process.env.BENCH_SVC_DIR = given
  })

  it("are the bare server and the Effect floor, each a script that reads its options from the harness", () => {
    expect(BASELINE_NAMES).toEqual(["bare", "floor"])
    for (const name of BASELINE_NAMES) {
      const text = fs.readFileSync(scriptOf(name), "utf8")
      expect(text).toContain(`process.env.${BASELINES[name].env}`)
      expect(text).toContain("serve({")
    }
    // The floor is Effect with nothing of svc: no import from src/.
    expect(fs.readFileSync(scriptOf("floor"), "utf8")).not.toMatch(/from "(\.\.\/)+src\//)
  })

  it("no svc checkout may take a baseline's label", () => {
    for (const name of BASELINE_NAMES) {
      process.env.BENCH_SVC_DIR = `${name}=/nowhere`
      expect(() => svcCheckouts()).toThrow(`other than "bare" and "floor"`)
    }
  })

  it("reads svc's CPU as a ratio of a baseline's, and names the arms", () => {
    expect(cpuRatio(1450, 1000)).toBe("1.45x")
    expect(cpuRatio(500, 1000)).toBe("0.50x")
    expect(cpuRatio(1000, 0)).toBe("n/a")
    expect(cpuRatio(undefined, 1000)).toBe("n/a")
    expect(cpuRatio(Number.NaN, 1000)).toBe("n/a")
    expect(armTitle("floor")).toBe("Effect floor (HttpApi + sql-pg)")
    expect(armTitle("bare")).toBe("bare node:http + INSERT")
    expect(armTitle("before")).toBe("before")
  })
})
