import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { allowedAttributes } from "../../../src/otlp/Spans.ts"

const docs = readFileSync(new URL("../../../docs/telemetry.md", import.meta.url), "utf8")

describe("docs/telemetry.md's GenAI table", () => {
  it("names exactly the gen_ai.* attributes the allowlist lets through", () => {
    const section = docs.slice(docs.indexOf("## GenAI semantic conventions"), docs.indexOf("## How spans are sent"))
    const documented = new Set([...section.matchAll(/^\| [^|]+ \| `(gen_ai\.[a-z_.]+)` \|/gm)].map((m) => m[1]!))
    const allowed = new Set([...allowedAttributes].filter((key) => key.startsWith("gen_ai.")))
    assert.deepStrictEqual([...documented].sort(), [...allowed].sort())
    assert.isAbove(allowed.size, 0)
  })
})
