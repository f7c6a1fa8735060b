/**
 * docs/architecture.md's "How a delivery travels" follows one approval
 * event through the files it meets. The page states its own rules: its
 * steps name each file once, in the order the event meets it, and every
 * file exists. A file merged, moved or renamed without the page following
 * fails here. The hand-offs between folders, counted in its opening, are
 * held by `test/unit/structure/delivery-trip.test.ts`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { root } from "../../support/process.ts"

const page = fs.readFileSync(path.join(root, "docs/architecture.md"), "utf8")
const heading = "### How a delivery travels\n"
const rest = page.slice(page.indexOf(heading) + heading.length)
const section = rest.slice(0, rest.search(/^#{2,3} /m))
/** The steps, after the opening and its table of hand-offs. */
const steps = section.slice(section.search(/^1\. \*\*/m))

/** The files the trip names with their folder under `src/` (`deliveries/Leases.ts`), in order. */
const named = Array.from(steps.matchAll(/`((?:[a-z]+\/)+[A-Za-z-]+\.ts)`/g), (match) => match[1]!)

describe("docs/architecture.md, how a delivery travels", () => {
  it("names each file once, and every file it names exists under src/", () => {
    assert.isAbove(named.length, 20)
    const twice = named.filter((file, i) => named.indexOf(file) !== i)
    assert.deepStrictEqual(twice, [])
    const missing = named.filter((file) => !fs.existsSync(path.join(root, "src", file.replace(/^src\//, ""))))
    assert.deepStrictEqual(missing, [])
  })
})
