/**
 * svc's four packages work as a user installs them: built and packed
 * (`npm pack`), installed from the tarballs into projects in a temporary
 * folder outside the repository (their dependencies from the npm registry,
 * through the shared npm cache), then used there:
 *
 * - `tsc --strict` compiles a consumer of every public API, typed errors
 *   included, and refuses a broken one;
 * - the client on plain Node (no TypeScript, no bundler) talks to a server
 *   started by the packed server's `svc start`, installed with
 *   `npm ci --omit=dev` from the consumer's lockfile;
 * - a consumer's vitest file passes with the test kit;
 * - the receiver kit verifies a real signed delivery from that server (HTTPS
 *   on loopback with a test CA), from ES modules and from CommonJS;
 * - the client installs nothing but itself and `effect`, and bundles for
 *   the browser; the installed sizes are printed.
 *
 * `npm run test:packages` (two to three minutes; not part of `npm test`).
 */
import { assert, afterAll, beforeAll, describe, it } from "@effect/vitest"
import * as esbuild from "esbuild"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { VERSION } from "../../src/api/Version.ts"
import { makeTestTls } from "../support/tls.ts"
import { BROKEN_TS, CLIENT_MJS, CONSUMER_TS, KIT_TEST_TS, KIT_VITEST_CONFIG, RECEIVER_MJS, VERIFY_CJS, VERIFY_EFFECT_MJS } from "./fixtures.ts"

const root = fileURLToPath(new URL("../../", import.meta.url))
const work = fs.mkdtempSync(path.join(tmpdir(), "svc-packaging-"))
const tarballs = path.join(work, "tarballs")
const dirs = {
  consumer: path.join(work, "consumer"),
  deployed: path.join(work, "deployed"),
  clientOnly: path.join(work, "client-only"),
  receiverOnly: path.join(work, "receiver-only")
}
/** Node 24 (the repository's) first on PATH: the server needs Node >= 22.19, the machine's may be older. */
const node24 = path.join(root, "node_modules/node/bin")

/** The environment of a user's shell: none of the npm variables of the `npm run` that started this test. */
const userEnv = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.toLowerCase().startsWith("npm_") && name !== "INIT_CWD" && name !== "NODE") env[name] = value
  }
  const PATH = (process.env.PATH ?? "").split(path.delimiter).filter((entry) => !entry.includes("node_modules")).join(path.delimiter)
  return { ...env, PATH: `${node24}${path.delimiter}${PATH}`, npm_config_audit: "false", npm_config_fund: "false", npm_config_update_notifier: "false", ...extra }
}

const run = (command: string, args: ReadonlyArray<string>, cwd: string, env = userEnv()) => {
  const result = spawnSync(command, args, { cwd, env, encoding: "utf8", timeout: 240_000 })
  if (result.error !== undefined) throw result.error
  return result
}

const runAsync = (command: string, args: ReadonlyArray<string>, cwd: string, env = userEnv()) =>
  new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(command, args, { cwd, env })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => (stdout += chunk))
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.on("error", reject)
    child.on("close", (status) => resolve({ status, stdout, stderr }))
  })

const ok = (result: { status: number | null; stdout: string; stderr: string }, what: string) => {
  assert.strictEqual(result.status, 0, `${what}:\n${result.stdout}\n${result.stderr}`)
  return result.stdout
}

const npmInstall = async (dir: string, args: ReadonlyArray<string> = ["install", "--prefer-offline"]) =>
  ok(await runAsync("npm", args, dir), `npm ${args.join(" ")} in ${path.basename(dir)}`)

const writeProject = (dir: string, manifest: object, files: Record<string, string> = {}) => {
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: path.basename(dir), private: true, type: "module", ...manifest }, null, 2))
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true })
    fs.writeFileSync(path.join(dir, name), text)
  }
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

/** Polls `check` until it answers, or fails after `ms`. */
const waitFor = async <A>(what: string, ms: number, check: () => Promise<A | undefined>): Promise<A> => {
  const deadline = performance.now() + ms
  for (;;) {
    const value = await check().catch(() => undefined)
    if (value !== undefined) return value
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

/** Bytes on disk under `dir` (files only, links not followed). */
const bytesUnder = (dir: string): number => {
  let total = 0
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += fs.statSync(path.join(entry.parentPath, entry.name)).size
  }
  return total
}

/** A package and every package it depends on (dependencies, peer and optional ones present), as installed under `project`. */
const closureOf = (project: string, name: string): Map<string, string> => {
  const found = new Map<string, string>()
  const visit = (from: string, dependency: string) => {
    for (let dir = from; ; dir = path.dirname(dir)) {
      const candidate = path.join(dir, "node_modules", dependency)
      if (fs.existsSync(path.join(candidate, "package.json"))) {
        if (found.has(candidate)) return
        found.set(candidate, dependency)
        const manifest = JSON.parse(fs.readFileSync(path.join(candidate, "package.json"), "utf8"))
        for (const next of Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies, ...manifest.optionalDependencies })) {
          visit(candidate, next)
        }
        return
      }
      if (dir === project || dir === path.dirname(dir)) return
    }
  }
  visit(project, name)
  return found
}

/** Installed bytes of a package with its dependencies (each package's own files, nested node_modules counted once). */
const installedBytes = (project: string, name: string): number =>
  [...closureOf(project, name).keys()].reduce((sum, dir) => {
    let total = 0
    for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
      const full = path.join(entry.parentPath, entry.name)
      if (entry.isFile() && !path.relative(dir, full).split(path.sep).includes("node_modules")) total += fs.statSync(full).size
    }
    return sum + total
  }, 0)

const megabytes = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`

let tarballOf: Record<"svc" | "client" | "receiver" | "testing", string>
let server: ChildProcess | undefined
let serverUrl = ""
let serverLog = ""
let apiKey = ""
let receiver: ChildProcess | undefined
let receiverLog = ""
let receiverPort = 0
const dataDir = path.join(work, "data")
const files = { secret: path.join(work, "secret.txt"), delivery: path.join(work, "delivery.json"), cert: path.join(work, "cert.pem"), key: path.join(work, "key.pem") }
const started = performance.now()
const phase = (what: string) => console.log(`packaging test: ${what} after ${Math.round((performance.now() - started) / 1000)} s`)

beforeAll(async () => {
  // The four tarballs, built as `npm run pack` builds them.
  ok(run(process.execPath, [path.join(root, "scripts/build-console.ts"), "--if-stale", "--quiet"], root, process.env), "console build")
  const packed = ok(run(process.execPath, [path.join(root, "scripts/build-packages.ts"), "--pack", tarballs], root, process.env), "build and pack")
  const names = packed.trim().split("\n").map((line) => path.basename(line.trim()))
  const find = (prefix: string) => {
    const name = names.find((file) => file.startsWith(prefix))
    assert.isDefined(name, `${prefix}*.tgz in ${names.join(", ")}`)
    return `file:../tarballs/${name}`
  }
  phase("built and packed")
  tarballOf = { svc: find("svc-0"), client: find("svc-client-"), receiver: find("svc-receiver-"), testing: find("svc-testing-") }

  const effect = JSON.parse(fs.readFileSync(path.join(root, "node_modules/effect/package.json"), "utf8")).version as string
  writeProject(dirs.consumer, {
    dependencies: { svc: tarballOf.svc, "@svc/client": tarballOf.client, "@svc/receiver": tarballOf.receiver, "@svc/testing": tarballOf.testing, effect: `^${effect}` },
    devDependencies: { vitest: "^5.1.1", "@effect/vitest": "^4.0.5" }
  }, {
    "consumer.ts": CONSUMER_TS,
    "broken.ts": BROKEN_TS,
    "client.mjs": CLIENT_MJS,
    "receiver.mjs": RECEIVER_MJS,
    "verify-effect.mjs": VERIFY_EFFECT_MJS,
    "test/svc.test.ts": KIT_TEST_TS,
    "vitest.config.ts": KIT_VITEST_CONFIG,
    "tsconfig.json": JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", lib: ["ES2022", "DOM"], types: [], skipLibCheck: true },
      files: ["consumer.ts", "broken.ts"]
    })
  })
  writeProject(dirs.clientOnly, { dependencies: { "@svc/client": tarballOf.client, effect: `^${effect}` } }, { "client.mjs": CLIENT_MJS })
  writeProject(dirs.receiverOnly, { dependencies: { "@svc/receiver": tarballOf.receiver } }, { "verify.cjs": VERIFY_CJS })
  const tls = await makeTestTls()
  fs.writeFileSync(files.cert, tls.cert)
  fs.writeFileSync(files.key, tls.key)

  await Promise.all([
    // The consumer first (it writes the lockfile), then the server as deployed from that lockfile.
    npmInstall(dirs.consumer).then(async () => {
      fs.mkdirSync(dirs.deployed)
      for (const name of ["package.json", "package-lock.json"]) fs.copyFileSync(path.join(dirs.consumer, name), path.join(dirs.deployed, name))
      phase("consumer installed")
      await npmInstall(dirs.deployed, ["ci", "--omit=dev", "--prefer-offline"])
      phase("server deployed (npm ci --omit=dev)")
    }),
    npmInstall(dirs.clientOnly),
    npmInstall(dirs.receiverOnly)
  ])

  // `svc start` of the deployed project, on the embedded database in a fresh data directory.
  const port = await freePort()
  serverUrl = `http://127.0.0.1:${port}`
  const serverEnv = userEnv({ PORT: String(port), HOST: "127.0.0.1", SVC_DATA_DIR: dataDir, SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8", SVC_EXTRA_CA_FILE: tls.caFile })
  server = spawn("npx", ["--no-install", "svc", "start"], { cwd: dirs.deployed, env: serverEnv, detached: true })
  server.stdout!.on("data", (chunk) => (serverLog += chunk))
  server.stderr!.on("data", (chunk) => (serverLog += chunk))
  await waitFor(`svc start (${serverLog})`, 60_000, async () => ((await fetch(`${serverUrl}/health`)).ok ? true : undefined))
  phase("svc start answers /health")
  const cli = (...args: Array<string>) => JSON.parse(ok(run("npx", ["--no-install", "svc", ...args, "--json"], dirs.deployed, serverEnv), `svc ${args.join(" ")}`))
  const org = cli("orgs", "create", "--name", "packaging")
  apiKey = cli("keys", "create", "--org", org.id, "--scopes", "tasks.write,tasks.read,feedback.write,org_config.write").key

  receiver = spawn(path.join(node24, "node"), ["receiver.mjs"], {
    cwd: dirs.consumer,
    env: userEnv({ CERT_FILE: files.cert, KEY_FILE: files.key, SECRET_FILE: files.secret, DELIVERY_FILE: files.delivery }),
    detached: true
  })
  receiver.stdout!.on("data", (chunk) => (receiverLog += chunk))
  receiver.stderr!.on("data", (chunk) => (receiverLog += chunk))
  receiverPort = await waitFor("the receiver", 10_000, async () => {
    const match = /LISTENING (\d+)/.exec(receiverLog)
    return match === null ? undefined : Number(match[1])
  })
}, 300_000)

const stop = async (child: ChildProcess | undefined) => {
  if (child === undefined || child.exitCode !== null || child.pid === undefined) return
  const exited = new Promise((resolve) => child.once("exit", resolve))
  process.kill(-child.pid, "SIGTERM")
  await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 20_000))])
}

afterAll(async () => {
  await Promise.all([stop(server), stop(receiver)])
  fs.rmSync(work, { recursive: true, force: true })
  console.log(`packaging test: ${Math.round((performance.now() - started) / 1000)} s in all`)
}, 60_000)

describe("svc's packages, installed from their tarballs outside the repository", () => {
  it("tsc --strict compiles a consumer of every package's public API (typed errors included) and refuses a broken one", () => {
    const result = run(process.execPath, [path.join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"], dirs.consumer)
    const errors = `${result.stdout}${result.stderr}`.split("\n").filter((line) => /error TS\d+/.test(line))
    assert.deepStrictEqual(errors.filter((line) => !line.startsWith("broken.ts")), [], errors.join("\n"))
    // Each wrong line of broken.ts is caught: the packages' types were read, not taken as `any`.
    const lines = new Set(errors.map((line) => Number(/^broken\.ts\((\d+),/.exec(line)?.[1])))
    const wrong = BROKEN_TS.split("\n").flatMap((line, i) => (/^export const wrong/.test(line) ? [i + 1] : []))
    assert.lengthOf(wrong, 4)
    for (const line of wrong) assert.isTrue(lines.has(line), `broken.ts line ${line} compiled:\n${errors.join("\n")}`)
  })

  it("npm ci --omit=dev from the consumer's lockfile installs a server that `svc start` runs: /health answers, svc --version says 0.2.0", async () => {
    const health = await fetch(`${serverUrl}/health`)
    assert.strictEqual(health.status, 200)
    assert.strictEqual(fs.existsSync(path.join(dirs.deployed, "node_modules/vitest")), false, "dev dependencies were omitted")
    const version = run("npx", ["--no-install", "svc", "--version"], dirs.deployed)
    assert.strictEqual(version.stdout.trim(), `svc v${VERSION}`, `${version.stdout}${version.stderr}`)
  })

  it("the client, on plain Node without TypeScript or a bundler, creates a task, logs a run and sends feedback; the receiver kit verifies the server's signed delivery", async () => {
    const out = ok(run(path.join(node24, "node"), ["client.mjs"], dirs.consumer, userEnv({
      SVC_URL: serverUrl,
      SVC_API_KEY: apiKey,
      RECEIVER_URL: `https://127.0.0.1:${receiverPort}/hooks/svc`,
      SECRET_FILE: files.secret
    })), "client.mjs")
    const result = JSON.parse(out.trim().split("\n").at(-1)!)
    assert.match(result.task, /^[0-9a-f-]{36}$/)
    assert.match(result.run, /^[0-9a-f]{32}$/)
    assert.strictEqual(result.feedback, "recorded")
    assert.strictEqual(result.missing, "NotFound")
    // The receiver answered 202 only because the kit verified the delivery.
    assert.strictEqual(result.delivery.status, 202, receiverLog)
    // (its output is read while this test waits: the client ran synchronously)
    await waitFor("the receiver's log", 5_000, async () => (/VERIFIED|REFUSED/.test(receiverLog) ? true : undefined))
    assert.match(receiverLog, /VERIFIED approval\.\w+ /)
    assert.notMatch(receiverLog, /REFUSED/)
  })

  it("require(\"@svc/receiver\") from CommonJS verifies the same delivery and refuses it altered", () => {
    const out = ok(run(path.join(node24, "node"), ["verify.cjs"], dirs.receiverOnly, userEnv({ SECRET_FILE: files.secret, DELIVERY_FILE: files.delivery })), "verify.cjs")
    const result = JSON.parse(out.trim())
    assert.match(result.type, /^approval\./)
    assert.strictEqual(result.test, true)
    assert.strictEqual(result.refused, "bad_signature")
  })

  it("@svc/receiver/effect verifies it in an Effect program and fails with a typed WebhookRejected", () => {
    const out = ok(run(path.join(node24, "node"), ["verify-effect.mjs"], dirs.consumer, userEnv({ SECRET_FILE: files.secret, DELIVERY_FILE: files.delivery })), "verify-effect.mjs")
    const result = JSON.parse(out.trim())
    assert.match(result.type, /^approval\./)
    assert.strictEqual(result.refused, "bad_signature")
  })

  it.runIf(/^v20\./.test(spawnSync("/usr/bin/node", ["--version"], { encoding: "utf8" }).stdout ?? ""))("the client runs on Node 20 (the machine's)", () => {
    const out = ok(run("/usr/bin/node", ["client.mjs"], dirs.clientOnly, { ...userEnv({ SVC_URL: serverUrl, SVC_API_KEY: apiKey }), PATH: process.env.PATH ?? "" }), "client.mjs on Node 20")
    const result = JSON.parse(out.trim().split("\n").at(-1)!)
    assert.match(result.node, /^20\./)
    assert.strictEqual(result.feedback, "recorded")
  })

  it("a consumer's vitest file with the test kit passes", () => {
    const result = run("npx", ["--no-install", "vitest", "run"], dirs.consumer)
    ok(result, "vitest in the consumer")
    assert.match(result.stdout, /1 passed/)
  })

  it("the client installs nothing but itself and effect, and bundles for the browser without node: modules", async () => {
    const modules = path.join(dirs.clientOnly, "node_modules")
    const installed = fs.readdirSync(modules).filter((name) => !name.startsWith("."))
      .flatMap((name) => (name.startsWith("@") ? fs.readdirSync(path.join(modules, name)).map((inner) => `${name}/${inner}`) : [name]))
    assert.sameMembers(installed, ["@svc/client", "effect"])
    assert.deepStrictEqual([...closureOf(dirs.clientOnly, "@svc/client").values()].sort(), ["@svc/client", "effect"])
    const bundle = await esbuild.build({
      absWorkingDir: dirs.clientOnly,
      stdin: { contents: 'export { SvcClient, Api, NotFound } from "@svc/client"', resolveDir: dirs.clientOnly, loader: "js" },
      bundle: true,
      platform: "browser",
      format: "esm",
      write: false,
      metafile: true,
      logLevel: "silent"
    })
    const inputs = Object.keys(bundle.metafile.inputs)
    assert.deepStrictEqual(inputs.filter((input) => input.startsWith("node:") || !/node_modules\/(effect|@svc\/client)\//.test(input) && input !== "<stdin>"), [])
  })

  it("prints each package's tarball and installed size (with its dependencies)", () => {
    const rows = (["svc", "client", "testing", "receiver"] as const).map((key) => {
      const name = key === "svc" ? "svc" : `@svc/${key}`
      const tarball = fs.statSync(path.join(tarballs, tarballOf[key].replace("file:../tarballs/", ""))).size
      const project = key === "client" ? dirs.clientOnly : key === "receiver" ? dirs.receiverOnly : dirs.consumer
      const installed = installedBytes(project, name)
      const packages = closureOf(project, name).size
      return `${name.padEnd(14)} tarball ${megabytes(tarball).padStart(8)}   installed ${megabytes(installed).padStart(8)} (${packages} packages)`
    })
    rows.push(`deployed server (npm ci --omit=dev): ${megabytes(bytesUnder(path.join(dirs.deployed, "node_modules")))}`)
    console.log(rows.join("\n"))
    assert.strictEqual(closureOf(dirs.receiverOnly, "@svc/receiver").size, 1, "the receiver kit has no dependencies")
  })
})
