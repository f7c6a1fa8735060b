/**
 * The documentation's examples work: TypeScript blocks compile against
 * svc's own packages (`@svc/client`, `@svc/testing`, `@svc/receiver`), shell
 * blocks parse, JSON blocks are JSON, and the Python verifier accepts what
 * svc signs and refuses what it must. A block that cannot be checked here
 * (another language's toolchain, a fragment) says so in its fence:
 * ```go no-run. The README's shell blocks are also run, in order, by
 * test/integration/foundation/readme.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { signatureHeader } from "../../../src/notifications/Signing.ts"
import { type CodeBlock, codeBlocks, documentationPages, read } from "../../support/markdown.ts"
import { root } from "../../support/process.ts"

const blocks = documentationPages().flatMap((page) => codeBlocks(page, read(page)))
const checked = (lang: string) => blocks.filter((block) => block.lang === lang && !block.flags.includes("no-run"))
const where = (block: CodeBlock) => `${block.page}:${block.line}`

/** Languages checked here; blocks of any other must say `no-run`, except output and pictures. */
const CHECKED = new Set(["ts", "sh", "json", "python"])
const SHOWN = new Set(["", "text", "mermaid"])

const python = spawnSync("python3", ["--version"]).status === 0 ? "python3" : undefined

describe("the documentation's examples", () => {
  it("every code block is checked, or its fence says no-run", () => {
    assert.isAbove(blocks.length, 20)
    const unchecked = blocks.filter((block) => !CHECKED.has(block.lang) && !SHOWN.has(block.lang) && !block.flags.includes("no-run"))
    assert.deepStrictEqual(unchecked.map(where), [])
  })

  it("TypeScript blocks compile against svc's packages, and a broken one is caught", () => {
    const dir = path.join(root, ".docs-examples")
    fs.rmSync(dir, { recursive: true, force: true })
    fs.mkdirSync(dir)
    try {
      const sources = checked("ts")
      assert.isAtLeast(sources.length, 3)
      const names = sources.map((block, i) => {
        const name = `example-${i}.ts`
        fs.writeFileSync(path.join(dir, name), `// ${where(block)}\n${block.code}\nexport {}\n`)
        return name
      })
      // The check itself: this one must fail, and alone.
      fs.writeFileSync(path.join(dir, "broken.ts"), 'import { SvcClient } from "@svc/client"\nexport const wrong: number = SvcClient\n')
      fs.writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({
        extends: "../tsconfig.json",
        compilerOptions: { noUnusedLocals: false, noUnusedParameters: false },
        include: [...names, "broken.ts"]
      }))
      const result = spawnSync(path.join(root, "node_modules/.bin/tsc"), ["-p", path.join(dir, "tsconfig.json")], { cwd: root, encoding: "utf8" })
      const errors = `${result.stdout}${result.stderr}`.split("\n").filter((line) => /error TS\d+/.test(line))
      const files = new Set(errors.map((line) => path.basename(line.split("(")[0]!)))
      assert.deepStrictEqual([...files], ["broken.ts"], errors.join("\n"))
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)

  it("shell blocks parse", () => {
    const sources = checked("sh")
    assert.isAtLeast(sources.length, 10)
    for (const block of sources) {
      const result = spawnSync("bash", ["-n"], { input: block.code, encoding: "utf8" })
      assert.strictEqual(result.status, 0, `${where(block)}: ${result.stderr}`)
    }
    assert.notStrictEqual(spawnSync("bash", ["-n"], { input: "curl --org <org id>", encoding: "utf8" }).status, 0, "bash -n sees a placeholder")
  })

  it("JSON blocks are JSON", () => {
    for (const block of checked("json")) assert.doesNotThrow(() => JSON.parse(block.code), undefined, undefined, where(block))
  })

  it.skipIf(python === undefined)("the Python verifier accepts what svc signs and refuses a wrong secret, an edited body, an old timestamp and a malformed header", () => {
    const [block] = checked("python")
    assert.isDefined(block)
    const secret = "whsec_documentationExampleSecret0123456789abcdefghij"
    const body = JSON.stringify({ id: "e1", type: "approval.approved", org_id: "o1", occurred_at: "2026-11-23T10:00:00.000Z", approval: {} })
    const now = Math.floor(Date.now() / 1000)
    const cases = {
      secret,
      body,
      // During a rotation overlap: one v1= per secret, this one the second.
      good: signatureHeader(["whsec_previous", secret], now, body),
      wrong_secret: signatureHeader([`${secret}x`], now, body),
      old: signatureHeader([secret], now - 301, body),
      malformed: "v1=abc"
    }
    const harness = `${block!.code}

import json, sys
cases = json.load(sys.stdin)
raw = cases["body"].encode()
verify_svc_signature(raw, cases["good"], cases["secret"])
outcomes = {}
for name, header, body in [("wrong_secret", cases["wrong_secret"], raw), ("edited_body", cases["good"], raw + b" "), ("old", cases["old"], raw), ("malformed", cases["malformed"], raw)]:
    try:
        verify_svc_signature(body, header, cases["secret"])
        outcomes[name] = "accepted"
    except ValueError as error:
        outcomes[name] = str(error)
print(json.dumps(outcomes))
`
    const out = execFileSync(python!, ["-c", harness], { input: JSON.stringify(cases), encoding: "utf8" })
    assert.deepStrictEqual(JSON.parse(out), {
      wrong_secret: "bad_signature",
      edited_body: "bad_signature",
      old: "timestamp_outside_tolerance",
      malformed: "malformed_header"
    })
  })
})
