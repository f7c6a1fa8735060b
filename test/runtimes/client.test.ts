/**
 * @svc/client runs wherever `fetch` does: the package as published (built,
 * packed, unpacked into a consumer's node_modules beside `effect`) runs as
 * plain JavaScript under Node, Deno and Bun, against a loopback server that
 * answers as svc does (a health check, and a typed NotFound problem).
 * Missing runtimes are skipped as in receiver.test.ts (failed under CI).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { spawn, spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { VERSION } from "../../src/api/Version.ts"
import { binOf, ci, missingRuntimes } from "./runtimes.ts"

const root = fileURLToPath(new URL("../../", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "svc-client-runtimes-"))
const consumer = join(dir, "consumer")
let server: Server
let baseUrl = ""

const ENTRY = (url: string) =>
  `import { Effect } from "effect"
import { SvcClient } from "@svc/client"

const program = Effect.gen(function*() {
  const svc = yield* SvcClient
  const health = yield* svc.health()
  const missing = yield* svc.tasks.get({ params: { task_id: "0193a0a0-0000-7000-8000-000000000000" } }).pipe(
    Effect.as("found"),
    Effect.catchTag("NotFound", (error) => Effect.succeed(error._tag))
  )
  return { health: health.status, missing }
}).pipe(Effect.provide(SvcClient.layer({ baseUrl: ${JSON.stringify(url)}, apiKey: "svc_test" })))

console.log("CLIENT-RESULT " + JSON.stringify(await Effect.runPromise(program)))
`

const run = (command: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  new Promise<{ status: number | null; output: string }>((resolve, reject) => {
    // Asynchronous: the server answering the client lives in this process.
    const child = spawn(command, args, { cwd: consumer, env: { ...process.env, ...env } })
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    child.on("error", reject)
    child.on("close", (status) => resolve({ status, output }))
  })

beforeAll(async () => {
  const built = spawnSync(process.execPath, [join(root, "scripts/build-packages.ts"), "client", "--if-stale"], {
    cwd: root,
    encoding: "utf8"
  })
  assert.strictEqual(built.status, 0, built.stderr)
  const packed = spawnSync("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", dir], {
    cwd: join(root, "packages/client"),
    encoding: "utf8"
  })
  assert.strictEqual(packed.status, 0, packed.stderr)
  const [tarball] = JSON.parse(packed.stdout) as Array<{ filename: string }>
  const scope = join(consumer, "node_modules/@svc")
  mkdirSync(scope, { recursive: true })
  const unpacked = spawnSync("tar", ["-xzf", join(dir, tarball!.filename), "-C", scope])
  assert.strictEqual(unpacked.status, 0)
  spawnSync("mv", [join(scope, "package"), join(scope, "client")])
  symlinkSync(realpathSync(join(root, "node_modules/effect")), join(consumer, "node_modules/effect"), "dir")
  writeFileSync(
    join(consumer, "package.json"),
    JSON.stringify({
      name: "client-consumer",
      private: true,
      type: "module",
      dependencies: { "@svc/client": "0.2.0", effect: "^4.1.0" }
    })
  )
  server = createServer((request, response) => {
    if (request.url === "/health") {
      return response.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({ status: "ok", version: VERSION })
      )
    }
    response.writeHead(404, { "content-type": "application/problem+json" })
      .end(JSON.stringify({ type: "urn:svc:problem:not-found", title: "Not found", status: 404, code: "NOT_FOUND" }))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  baseUrl = `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`
  writeFileSync(join(consumer, "entry.js"), ENTRY(baseUrl))
}, 120_000)

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve))
  rmSync(dir, { recursive: true, force: true })
})

const missing = missingRuntimes("The client's cross-runtime test", ["Deno", "Bun"])
const runtimes: ReadonlyArray<
  { readonly name: string; readonly command: () => [string, Array<string>, Record<string, string>?] }
> = [
  { name: "Node", command: () => [process.execPath, ["entry.js"]] },
  {
    name: "Deno",
    command: () => [binOf("deno"), [
      "run",
      "--no-prompt",
      "--node-modules-dir=manual",
      "--allow-net=127.0.0.1",
      "--allow-read",
      "--allow-env",
      "entry.js"
    ], {
      DENO_DIR: join(dir, ".deno"),
      DENO_NO_UPDATE_CHECK: "1"
    }]
  },
  { name: "Bun", command: () => [binOf("bun"), ["--no-install", "entry.js"], { DO_NOT_TRACK: "1" }] }
]

describe("the typed client runs on every runtime it claims", () => {
  it.runIf(ci)("every runtime is installed (under CI a missing one is a failure, not a skip)", () => {
    assert.deepStrictEqual(missing, [], "npm ci --prefix test/runtimes installs them")
  })

  for (const runtime of runtimes) {
    it.skipIf(missing.includes(runtime.name))(`${runtime.name}: a decoded answer and a typed NotFound`, async () => {
      const [command, args, env] = runtime.command()
      const result = await run(command, args, env)
      const line = result.output.split("\n").find((text) => text.startsWith("CLIENT-RESULT "))
      assert.isDefined(line, `${runtime.name}: ${result.output}`)
      assert.deepStrictEqual(JSON.parse(line!.slice("CLIENT-RESULT ".length)), { health: "ok", missing: "NotFound" })
      assert.strictEqual(result.status, 0, result.output)
    }, 60_000)
  }
})
