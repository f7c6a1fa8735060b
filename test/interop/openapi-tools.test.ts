/**
 * Outside tools accept the OpenAPI document:
 * `redocly lint` with the recommended rules reports no error and no warning,
 * and `openapi-typescript` generates types that a TypeScript user's code
 * compiles against (TypeScript 5, which openapi-typescript needs, and the
 * project's TypeScript 7). Everything runs offline: Redocly's usage
 * telemetry is off (redocly.yaml), and nothing else reaches the network.
 *
 * Redocly, openapi-typescript and TypeScript 5 (about 60 MB) are this
 * folder's own npm project, not the repository's (interop.ts): `npm run
 * test:interop` installs them and runs this file. Without them a run of it
 * skips it and says so; under CI (`CI` set) it runs, and fails if they are
 * missing.
 */
import { assert, beforeAll, describe, it } from "@effect/vitest"
import { OpenApi } from "effect/http-api"
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Api } from "../../src/api/Api.ts"
import { interopRequire, packageDir, runs } from "./interop.ts"

const root = fileURLToPath(new URL("../../", import.meta.url))
const rootRequire = createRequire(join(root, "package.json"))
// openapi-typescript needs TypeScript 5 (its AST printer); it lives in this folder's project with it.
const toolsRequire = interopRequire
const installed = runs("openapi-tools.test.ts", "Redocly and openapi-typescript", "@redocly/cli", "openapi-typescript")

const run = (args: ReadonlyArray<string>, cwd: string) => {
  const result = spawnSync(process.execPath, args, {
    cwd,
    encoding: "utf8",
    timeout: 180_000,
    env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", NO_COLOR: "1" }
  })
  if (result.error !== undefined) throw result.error
  return result
}

let dir = ""
let document = ""

beforeAll(() => {
  if (!installed) return
  dir = mkdtempSync(join(tmpdir(), "svc-openapi-"))
  document = join(dir, "openapi.json")
  writeFileSync(document, JSON.stringify(OpenApi.fromApi(Api), null, 2))
})

describe.skipIf(!installed)("outside tools accept the OpenAPI document", () => {
  it("redocly lint (recommended rules): no error, no warning", () => {
    const cli = join(packageDir(toolsRequire, "@redocly/cli"), "bin/cli.js")
    const result = run([cli, "lint", document, "--config", join(root, "redocly.yaml"), "--format", "json"], dir)
    const report = JSON.parse(result.stdout)
    const problems = (report.problems as Array<
      { ruleId: string; severity: string; message: string; location: Array<{ pointer: string }> }
    >)
      .map((problem) => `${problem.severity} ${problem.ruleId}: ${problem.message} at ${problem.location[0]?.pointer}`)
    assert.deepStrictEqual(problems, [])
    assert.deepStrictEqual(report.totals, { errors: 0, warnings: 0, ignored: 0 })
    assert.strictEqual(result.status, 0, result.stderr)
  })

  it("openapi-typescript generates types a TypeScript user compiles against (TypeScript 5 and 7)", () => {
    const generator = join(packageDir(toolsRequire, "openapi-typescript"), "bin/cli.js")
    const generated = run([generator, document, "-o", join(dir, "svc-api.ts")], dir)
    assert.strictEqual(generated.status, 0, generated.stderr)
    assert.match(readFileSync(join(dir, "svc-api.ts"), "utf8"), /export interface paths/)
    writeFileSync(
      join(dir, "consumer.ts"),
      `import type { components, operations, paths } from "./svc-api.ts"

type CreateTask = paths["/v1/tasks"]["post"]["requestBody"]["content"]["application/json"]
type Task = paths["/v1/tasks"]["post"]["responses"][201]["content"]["application/json"]
type Forbidden = paths["/v1/tasks"]["post"]["responses"][403]["content"]["application/problem+json"]
type TooLarge = paths["/v1/tasks"]["post"]["responses"][413]["content"]["application/problem+json"]
type Mismatch = operations["feedback.submit"]["responses"][422]["content"]["application/problem+json"]
type StepAnswer = paths["/v1/agent-sessions/{session_id}/steps"]["post"]["responses"][200]["content"]["application/json"]

export const body: CreateTask = { name: "triage", answer_schema: { type: "object" } }
export const taskId = (task: Task): string => task.id
// 403 is a missing scope, or (console cookie) a cross-site request: the code tells them apart.
export const scope = (problem: Forbidden): string => problem.code === "INSUFFICIENT_SCOPE" ? problem.required_scope : problem.code
export const limit = (problem: TooLarge): "PAYLOAD_TOO_LARGE" => problem.code
export const field = (problem: Mismatch): string => problem.field
export const pending = (answer: StepAnswer): boolean => answer.decision === "pending"
export const invalid: components["schemas"]["InvalidRequestEncoded"]["code"] = "INVALID_REQUEST"
// @ts-expect-error a task name is a string
export const wrong: CreateTask = { name: 1, answer_schema: {} }
// @ts-expect-error an unknown decision does not compile
export const unknown: StepAnswer["decision"] = "maybe"
`
    )
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          exactOptionalPropertyTypes: true,
          noEmit: true,
          target: "ES2022",
          module: "ESNext",
          moduleResolution: "Bundler",
          allowImportingTsExtensions: true,
          skipLibCheck: false
        },
        files: ["consumer.ts"]
      })
    )
    for (const [name, require] of [["TypeScript 5", toolsRequire], ["TypeScript 7", rootRequire]] as const) {
      const tsc = join(packageDir(require, "typescript"), "bin/tsc")
      const compiled = run([tsc, "-p", join(dir, "tsconfig.json")], dir)
      assert.strictEqual(compiled.status, 0, `${name}: ${compiled.stdout}${compiled.stderr}`)
    }
  })
})
