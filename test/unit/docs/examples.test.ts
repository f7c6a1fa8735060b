/**
 * The documentation's examples work. A fenced block that is a command or a
 * request (`sh`, `bash`, `http`..., or text starting with `curl`, `npm`,
 * `npx` or `svc`) either runs in a test or says `illustrative` in its
 * fence (```` ```sh illustrative ````): the blocks that run are listed in
 * test/support/run-blocks.ts, whose runners take them from there (the
 * README's quick start and first calls: test/processes/foundation/readme.test.ts).
 * Besides, TypeScript blocks compile against svc's packages (`@svc/client`,
 * `@svc/testing`, `@svc/receiver`), shell blocks parse, JSON blocks are
 * JSON, and the Python verifier accepts what svc signs and refuses what it
 * must. A block of another language, or a fragment, says `illustrative`.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { signatureHeader } from "../../../src/notifications/send/Signing.ts"
import { type CodeBlock, codeBlocks, documentationPages, read } from "../../support/markdown.ts"
import { root } from "../../support/process.ts"
import { allBlocksRun, blocksRun, isCommand, isIllustrative, RUN_SECTIONS } from "../../support/run-blocks.ts"

const blocks = documentationPages().flatMap((page) => codeBlocks(page, read(page)))
const checked = (lang: string) => blocks.filter((block) => block.lang === lang && !isIllustrative(block))
const where = (block: CodeBlock) => `${block.page}:${block.line}`

/** Languages checked here; blocks of any other must say `illustrative`, except output and pictures. */
const CHECKED = new Set(["ts", "sh", "json", "python"])
const SHOWN = new Set(["", "text", "mermaid"])

const python = spawnSync("python3", ["--version"]).status === 0 ? "python3" : undefined

/**
 * The docs import svc's packages by their names (`@svc/client`...). Where
 * such a package is not installed in node_modules, its source in this
 * repository stands in, as the root package's `exports` name it
 * (`./client` for `@svc/client`).
 */
const unpublishedPaths = (): { paths?: Record<string, Array<string>> } => {
  const exports: Record<string, string> =
    JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")).exports ?? {}
  const paths: Record<string, Array<string>> = {}
  for (const [subpath, file] of Object.entries(exports)) {
    const name = `@svc/${subpath.replace(/^\.\//, "")}`
    if (!fs.existsSync(path.join(root, "node_modules", name.split("/").slice(0, 2).join("/")))) {
      paths[name] = [path.join("..", file)]
    }
  }
  return Object.keys(paths).length === 0 ? {} : { paths }
}

describe("the documentation's examples", () => {
  it("every code block is checked, or its fence says illustrative", () => {
    assert.isAbove(blocks.length, 20)
    const unchecked = blocks.filter((block) =>
      !CHECKED.has(block.lang) && !SHOWN.has(block.lang) && !isIllustrative(block)
    )
    assert.deepStrictEqual(unchecked.map(where), [])
    // One word for it: the older `no-run` is spelled `illustrative`.
    assert.deepStrictEqual(blocks.filter((block) => block.flags.includes("no-run")).map(where), [])
  })

  it("every command or request block runs in a test, or its fence says illustrative", () => {
    const run = allBlocksRun()
    assert.isAtLeast(run.size, 8)
    const neither = blocks.filter((block) => isCommand(block) && !isIllustrative(block) && !run.has(where(block)))
    assert.deepStrictEqual(
      neither.map(where),
      [],
      "run it in a test (test/support/run-blocks.ts) or mark its fence illustrative"
    )
    // Every section a runner runs exists and has blocks.
    for (const { page, section } of RUN_SECTIONS) assert.isNotEmpty(blocksRun(page, section), `${page} "${section}"`)
  })

  it("the reader's check sees a command block that nothing runs, and knows a request, a command in text and an illustrative one", () => {
    const page =
      "# P\n\n```sh\ncurl -s http://x\n```\n\n```http\nGET /v1/tasks HTTP/1.1\n```\n\n```\nnpx svc orgs list\n```\n\n```sh illustrative\nsvc start\n```\n\n```json\n{}\n```\n"
    const found = codeBlocks("P.md", page)
    assert.deepStrictEqual(found.map((block) => [isCommand(block), isIllustrative(block)]), [
      [true, false],
      [true, false],
      [true, false],
      [true, true],
      [false, false]
    ])
    const readme = "# R\n\n## Quick start\n\n```sh\nnpm start\n```\n\n## Other\n\n```sh\nnpm test\n```\n"
    assert.deepStrictEqual(blocksRun("R.md", "Quick start", readme).map((block) => [block.line, block.code]), [[
      5,
      "npm start"
    ]])
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
      fs.writeFileSync(
        path.join(dir, "broken.ts"),
        "import { SvcClient } from \"@svc/client\"\nexport const wrong: number = SvcClient\n"
      )
      fs.writeFileSync(
        path.join(dir, "tsconfig.json"),
        JSON.stringify({
          extends: "../tsconfig.json",
          compilerOptions: { noUnusedLocals: false, noUnusedParameters: false, ...unpublishedPaths() },
          include: [...names, "broken.ts"]
        })
      )
      const result = spawnSync(path.join(root, "node_modules/.bin/tsc"), ["-p", path.join(dir, "tsconfig.json")], {
        cwd: root,
        encoding: "utf8"
      })
      const errors = `${result.stdout}${result.stderr}`.split("\n").filter((line) => /error TS\d+/.test(line))
      const files = new Set(errors.map((line) => path.basename(line.split("(")[0]!)))
      assert.deepStrictEqual([...files], ["broken.ts"], errors.join("\n"))
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)

  it("shell blocks parse, illustrative ones too (they are copied by hand)", () => {
    const sources = blocks.filter((block) => block.lang === "sh")
    assert.isAtLeast(sources.length, 10)
    for (const block of sources) {
      const result = spawnSync("bash", ["-n"], { input: block.code, encoding: "utf8" })
      assert.strictEqual(result.status, 0, `${where(block)}: ${result.stderr}`)
    }
    assert.notStrictEqual(
      spawnSync("bash", ["-n"], { input: "curl --org <org id>", encoding: "utf8" }).status,
      0,
      "bash -n sees a placeholder"
    )
  })

  it("JSON blocks are JSON", () => {
    for (const block of checked("json")) {
      assert.doesNotThrow(() => JSON.parse(block.code), undefined, undefined, where(block))
    }
  })

  it.skipIf(python === undefined)(
    "the Python verifier accepts what svc signs and refuses a wrong secret, an edited body, an old timestamp and a malformed header",
    () => {
      const [block] = checked("python")
      assert.isDefined(block)
      const secret = "whsec_documentationExampleSecret0123456789abcdefghij"
      const body = JSON.stringify({
        id: "e1",
        type: "approval.approved",
        org_id: "o1",
        occurred_at: "2026-11-23T10:00:00.000Z",
        approval: {}
      })
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
    }
  )
})
