/**
 * The receiver kit runs where it says it does: its one portable suite (packages/receiver/test/suite.ts) runs under
 * Node, Deno, Bun and workerd, each from its npm package, against the kit
 * as published: `npm pack` of packages/receiver, unpacked into a consumer's
 * node_modules and imported by its package name. The vectors are signed by
 * the service's own signer. Nothing reaches the network.
 *
 * Deno, Bun and workerd (about 340 MB) are this folder's own npm project,
 * not the repository's: `npm run test:runtimes` installs them and runs this
 * file. Without them a run skips their cases and says so; under CI
 * (`CI` set) a missing runtime fails instead.
 */
import { assert, beforeAll, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, renameSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "rolldown"
import * as kit from "../../packages/receiver/src/index.ts"
import { suite } from "../../packages/receiver/test/suite.ts"
import { signedVectors as vectors } from "../support/receiverVectors.ts"
import { binOf, ci, missingRuntimes } from "./runtimes.ts"

const root = fileURLToPath(new URL("../../", import.meta.url))
const kitDir = join(root, "packages/receiver")
const require = createRequire(join(root, "package.json"))
const run = (command: string, args: ReadonlyArray<string>, cwd: string, env: Record<string, string> = {}) => {
  const started = performance.now()
  const result = spawnSync(command, args, { cwd, encoding: "utf8", timeout: 120_000, env: { ...process.env, ...env } })
  if (result.error !== undefined) throw result.error
  return { ...result, milliseconds: Math.round(performance.now() - started) }
}

const ENTRY = `import * as kit from "@svc/receiver"
import { runSuite } from "./suite.js"
import vectors from "./vectors.js"

const runtime = typeof Deno !== "undefined"
  ? \`deno \${Deno.version.deno}\`
  : typeof Bun !== "undefined" ? \`bun \${Bun.version}\` : \`node \${process.versions.node}\`
const result = await runSuite(runtime, kit, vectors)
console.log(\`SUITE-RESULT \${JSON.stringify(result)}\`)
if (result.failed.length > 0) {
  if (typeof Deno !== "undefined") Deno.exit(1)
  else process.exitCode = 1
}
`

const WORKER = `import * as kit from "@svc/receiver"
import { runSuite } from "./suite.js"
import vectors from "./vectors.js"

export default {
  async test() {
    const result = await runSuite("workerd", kit, vectors)
    console.log(\`SUITE-RESULT \${JSON.stringify(result)}\`)
    if (result.failed.length > 0) throw new Error(\`\${result.failed.length} receiver kit cases failed\`)
  }
}
`

const WORKERD_CONFIG = `using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [(name = "receiver-suite", worker = .suite)],
);

const suite :Workerd.Worker = (
  modules = [
    (name = "worker.js", esModule = embed "worker.js"),
    (name = "suite.js", esModule = embed "suite.js"),
    (name = "harness.js", esModule = embed "harness.js"),
    (name = "vectors.js", esModule = embed "vectors.js"),
    (name = "@svc/receiver", esModule = embed "receiver.js"),
  ],
  compatibilityDate = "2026-10-01",
);
`

let consumer = ""
let expectedCases: Array<string> = []

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-receiver-"))
  consumer = join(dir, "consumer")
  // The package as published: built, then `npm pack` keeps only its `files`.
  const built = run(process.execPath, [join(root, "scripts/build-packages.ts"), "receiver", "--if-stale"], root)
  assert.strictEqual(built.status, 0, built.stderr)
  const packed = run("npm", ["pack", "--ignore-scripts", "--pack-destination", dir, "--json"], kitDir)
  assert.strictEqual(packed.status, 0, packed.stderr)
  const [tarball] = JSON.parse(packed.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>
  const modules = ["index", "events", "verify", "effect"].flatMap((name) => [`${name}.js`, `${name}.d.ts`])
  assert.sameMembers(tarball!.files.map((file) => file.path), [
    "package.json",
    "README.md",
    "dist/cjs/package.json",
    ...modules.flatMap((file) => [`dist/esm/${file}`, `dist/cjs/${file}`])
  ])
  const scope = join(consumer, "node_modules/@svc")
  mkdirSync(scope, { recursive: true })
  const unpacked = run("tar", ["-xzf", join(dir, tarball!.filename), "-C", scope], dir)
  assert.strictEqual(unpacked.status, 0, unpacked.stderr)
  renameSync(join(scope, "package"), join(scope, "receiver"))
  // The suite, compiled to plain JavaScript next to the consumer's entry points.
  const compiled = run(process.execPath, [
    binOf("typescript", "tsc", require),
    "-p",
    join(kitDir, "tsconfig.test.json"),
    "--outDir",
    join(dir, "build")
  ], root)
  assert.strictEqual(compiled.status, 0, compiled.stdout + compiled.stderr)
  for (const file of ["suite.js", "harness.js"]) {
    writeFileSync(join(consumer, file), readFileSync(join(dir, "build/test", file)))
  }
  const signed = vectors()
  expectedCases = suite(kit, signed).map((testCase) => testCase.name)
  writeFileSync(join(consumer, "vectors.js"), `export default ${JSON.stringify(signed)}\n`)
  writeFileSync(
    join(consumer, "package.json"),
    JSON.stringify({
      name: "receiver-consumer",
      private: true,
      type: "module",
      dependencies: { "@svc/receiver": "0.2.0" }
    })
  )
  writeFileSync(join(consumer, "entry.js"), ENTRY)
  writeFileSync(join(consumer, "worker.js"), WORKER)
  writeFileSync(join(consumer, "workerd.capnp"), WORKERD_CONFIG)
  // workerd takes named modules, not a node_modules tree: the kit as one
  // module, bundled as a Workers deploy tool does.
  await build({
    input: join(consumer, "node_modules/@svc/receiver/dist/esm/index.js"),
    platform: "neutral",
    logLevel: "warn",
    output: { format: "esm", file: join(consumer, "receiver.js"), codeSplitting: false }
  })
})

const allRuntimes: ReadonlyArray<
  { readonly name: string; readonly command: () => [string, Array<string>, Record<string, string>?] }
> = [
  { name: "Node", command: () => [process.execPath, ["entry.js"]] },
  {
    name: "Deno",
    command: () => [binOf("deno"), ["run", "--no-prompt", "entry.js"], {
      DENO_DIR: join(consumer, ".deno"),
      DENO_NO_UPDATE_CHECK: "1"
    }]
  },
  { name: "Bun", command: () => [binOf("bun"), ["--no-install", "entry.js"], { DO_NOT_TRACK: "1" }] },
  { name: "workerd", command: () => [binOf("workerd"), ["test", "workerd.capnp"]] }
]
const missing = missingRuntimes("The receiver kit's cross-runtime test", ["Deno", "Bun", "workerd"])
const runtimes = allRuntimes.filter((runtime) => !missing.includes(runtime.name))

describe("the receiver kit's suite passes on every runtime it claims", () => {
  it.runIf(ci)("every runtime is installed (under CI a missing one is a failure, not a skip)", () => {
    assert.deepStrictEqual(missing, [], "npm ci --prefix test/runtimes installs them")
  })

  for (const name of missing) {
    it.skip(`${name}, from its npm package (not installed: npm run test:runtimes)`, () => {})
  }

  for (const runtime of runtimes) {
    it(`${runtime.name}, from its npm package`, () => {
      const [command, args, env] = runtime.command()
      const result = run(command, args, consumer, env)
      const line = `${result.stdout}\n${result.stderr}`.split("\n").find((text) => text.includes("SUITE-RESULT "))
      assert.isDefined(line, `${runtime.name} printed no result: ${result.stdout}${result.stderr}`)
      const report = JSON.parse(line!.slice(line!.indexOf("SUITE-RESULT ") + "SUITE-RESULT ".length))
      assert.deepStrictEqual(report.failed, [], runtime.name)
      assert.deepStrictEqual(report.passed, expectedCases, `${runtime.name} ran every case`)
      assert.strictEqual(result.status, 0, `${runtime.name} exit status`)
      console.log(
        `${runtime.name} (${report.runtime}): ${report.total} cases in ${report.milliseconds} ms, ${result.milliseconds} ms with start-up`
      )
    })
  }

  it("a failing case fails the run on every runtime (the harness cannot pass silently)", () => {
    writeFileSync(join(consumer, "vectors.js"), `export default ${JSON.stringify({ ...vectors(), now: 1 })}\n`)
    try {
      for (const runtime of runtimes) {
        const [command, args, env] = runtime.command()
        const result = run(command, args, consumer, env)
        assert.notStrictEqual(result.status, 0, `${runtime.name} exit status with failing cases`)
      }
    } finally {
      writeFileSync(join(consumer, "vectors.js"), `export default ${JSON.stringify(vectors())}\n`)
    }
  })
})
