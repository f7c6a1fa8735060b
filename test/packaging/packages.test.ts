/**
 * svc's four packages work as a user installs them: built and packed
 * (`npm pack`), installed from the tarballs into projects in a temporary
 * folder outside the repository (their dependencies from the npm registry,
 * through the shared npm cache), then used there. The manual's own blocks
 * do it: every block whose fence says `consumer=<name>` (README, docs/ and
 * the packages' READMEs; test/support/run-blocks.ts) runs here as written,
 * commands in bash and code samples as the files they are;
 *
 * - svc's own names are never taken from a registry: the `@svc` scope's
 *   registry is a dead loopback port, the lockfiles resolve `svc` and
 *   `@svc/*` to the tarballs only, and the test kit installed alone with
 *   `--offline` installs no `svc`;
 * - `tsc --strict` compiles a consumer of every public API, typed errors
 *   included, and the manual's TypeScript samples, and refuses a broken one;
 * - the server installed as docs/operations.md says (`npm install
 *   --omit=dev`, `npx svc --version`, `npx svc start`) answers; its package
 *   has no development scripts and every link of its pages resolves inside it;
 * - the client on plain Node (no TypeScript, no bundler) talks to that
 *   server, on Node 24 and on Node 20 (installed there by Node 20's npm);
 *   the manual's client samples run against it;
 * - the manual's test-kit files pass with `npx vitest run` and vitest's
 *   default settings;
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
import { deadLink, linksOf } from "../support/markdown.ts"
import { type CodeBlock, consumerBlocks } from "../support/run-blocks.ts"
import { makeTestTls } from "../support/tls.ts"
import { BROKEN_TS, CLIENT_MJS, CONSUMER_TS, RECEIVER_MJS, VERIFY_CJS, VERIFY_EFFECT_MJS } from "./fixtures.ts"

const root = fileURLToPath(new URL("../../", import.meta.url))
const work = fs.mkdtempSync(path.join(tmpdir(), "svc-packaging-"))
const tarballs = path.join(work, "tarballs")
const dirs = {
  consumer: path.join(work, "consumer"),
  production: path.join(work, "production"),
  clientOnly: path.join(work, "client-only"),
  receiverOnly: path.join(work, "receiver-only"),
  kitAlone: path.join(work, "kit-alone")
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
  return {
    ...env,
    PATH: `${node24}${path.delimiter}${PATH}`,
    npm_config_audit: "false",
    npm_config_fund: "false",
    npm_config_update_notifier: "false",
    npm_config_prefer_offline: "true",
    ...extra
  }
}

/** The machine's own Node (20 here) and npm first: the shell of a user whose Node is older than the repository's. */
const machineEnv = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => {
  const env = userEnv(extra)
  return { ...env, PATH: (env.PATH ?? "").split(path.delimiter).filter((entry) => entry !== node24).join(path.delimiter) }
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

let tarballs_: Record<"svc" | "client" | "receiver" | "testing", string>
let server: ChildProcess | undefined
let serverUrl = ""
let serverLog = ""
let apiKey = ""
let receiver: ChildProcess | undefined
let receiverLog = ""
let receiverPort = 0
let versionShown = ""
const dataDir = path.join(work, "data")
const files = { secret: path.join(work, "secret.txt"), delivery: path.join(work, "delivery.json"), cert: path.join(work, "cert.pem"), key: path.join(work, "key.pem") }
const started = performance.now()
const phase = (what: string) => console.log(`packaging test: ${what} after ${Math.round((performance.now() - started) / 1000)} s`)

/** The manual's `consumer=` blocks, and the names this test ran (every one must be). */
const blocks = consumerBlocks()
const ranBlocks = new Set<string>()
const block = (name: string): CodeBlock => {
  const found = blocks.get(name)
  assert.isDefined(found, `no block says consumer=${name}`)
  ranBlocks.add(name)
  return found!
}
const where = (b: CodeBlock) => `${b.page}:${b.line}`

/** A shell block's commands: continuation lines joined, comments and blank lines left out. */
const commandsOf = (code: string): Array<string> =>
  code.split("\n").reduce<Array<string>>((commands, line) => {
    const last = commands.at(-1)
    if (last !== undefined && last.endsWith("\\")) commands[commands.length - 1] = `${last}\n${line}`
    else if (line.trim() !== "" && !line.trimStart().startsWith("#")) commands.push(line)
    return commands
  }, [])

/** Runs a shell block as written, in bash, in `dir`: each command must succeed; what each printed. */
const runBlock = async (name: string, dir: string, env = userEnv()): Promise<Array<string>> => {
  const b = block(name)
  const outputs: Array<string> = []
  for (const command of commandsOf(b.code)) outputs.push(ok(await runAsync("bash", ["-c", `set -eo pipefail\n${command}`], dir, env), `${where(b)} (${name}) in ${path.basename(dir)}: ${command}`))
  return outputs
}

/** The manual's samples that are modules: compiled, and loaded by Node 24 as they are. */
const MODULE_SAMPLES = ["feedback-export.ts", "webhooks-receive.ts", "webhooks-handle.ts"]

/** `@svc` packages from a registry would come from here: a loopback port nothing listens on. */
let deadRegistry = ""

/** A project outside the repository: a manifest, the four tarballs beside it (the manual names them `./svc-*.tgz`), its files. */
const writeProject = (dir: string, manifest: object, projectFiles: Record<string, string> = {}) => {
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: path.basename(dir), private: true, type: "module", ...manifest }, null, 2))
  fs.writeFileSync(path.join(dir, ".npmrc"), `@svc:registry=${deadRegistry}\n`)
  for (const tarball of Object.values(tarballs_)) fs.copyFileSync(path.join(tarballs, tarball), path.join(dir, tarball))
  for (const [name, text] of Object.entries(projectFiles)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true })
    fs.writeFileSync(path.join(dir, name), text)
  }
}

/** What a project's lockfile resolved for svc's own names (`svc`, `@svc/*`), by install path. */
const svcNamesResolved = (dir: string): Record<string, string> => {
  const lock = JSON.parse(fs.readFileSync(path.join(dir, "package-lock.json"), "utf8")) as { packages: Record<string, { resolved?: string; link?: boolean }> }
  const found: Record<string, string> = {}
  for (const [where, entry] of Object.entries(lock.packages)) {
    if (/(^|\/)node_modules\/(svc|@svc\/[^/]+)$/.test(where)) found[where] = entry.resolved ?? (entry.link === true ? "link" : "?")
  }
  return found
}

beforeAll(async () => {
  // The four tarballs, built as `npm run pack` builds them.
  ok(run(process.execPath, [path.join(root, "scripts/build-console.ts"), "--if-stale", "--quiet"], root, process.env), "console build")
  const packed = ok(run(process.execPath, [path.join(root, "scripts/build-packages.ts"), "--pack", tarballs], root, process.env), "build and pack")
  const names = packed.trim().split("\n").map((line) => path.basename(line.trim()))
  const find = (prefix: string) => {
    const name = names.find((file) => file.startsWith(prefix))
    assert.isDefined(name, `${prefix}*.tgz in ${names.join(", ")}`)
    return name!
  }
  phase("built and packed")
  tarballs_ = { svc: find("svc-0"), client: find("svc-client-"), receiver: find("svc-receiver-"), testing: find("svc-testing-") }
  deadRegistry = `http://127.0.0.1:${await freePort()}/`

  const typesNode = JSON.parse(fs.readFileSync(path.join(root, "node_modules/@types/node/package.json"), "utf8")).version as string
  // The consumer: the manual's samples as its files, its packages installed by the manual's commands below
  // (@types/node is the one thing a TypeScript project brings of its own).
  writeProject(dirs.consumer, { devDependencies: { "@types/node": `^${typesNode}` } }, {
    "consumer.ts": CONSUMER_TS,
    "broken.ts": BROKEN_TS,
    "client.mjs": CLIENT_MJS,
    "receiver.mjs": RECEIVER_MJS,
    "verify-effect.mjs": VERIFY_EFFECT_MJS,
    "client-example.ts": block("client-example").code,
    "api-client.ts": block("api-client").code,
    "test/svc.test.ts": block("testing-example").code,
    "test/api.test.ts": block("api-testing").code,
    // Modules the manual shows (functions to call from a program): compiled, and loaded by Node.
    "feedback-export.ts": block("feedback-export").code,
    "webhooks-receive.ts": block("webhooks-receive").code,
    "webhooks-handle.ts": block("webhooks-handle").code,
    "tsconfig.json": JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", lib: ["ES2022", "DOM"], types: ["node"], skipLibCheck: true },
      files: ["consumer.ts", "broken.ts", "client-example.ts", "api-client.ts", "test/svc.test.ts", "test/api.test.ts", ...MODULE_SAMPLES]
    })
  })
  writeProject(dirs.clientOnly, {}, { "client.mjs": CLIENT_MJS })
  writeProject(dirs.receiverOnly, {}, { "verify.cjs": VERIFY_CJS })
  writeProject(dirs.production, {})
  writeProject(dirs.kitAlone, {})
  const tls = await makeTestTls()
  fs.writeFileSync(files.cert, tls.cert)
  fs.writeFileSync(files.key, tls.key)

  const port = await freePort()
  serverUrl = `http://127.0.0.1:${port}`
  const serverEnv = userEnv({ PORT: String(port), HOST: "127.0.0.1", SVC_DATA_DIR: dataDir, SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8", SVC_EXTRA_CA_FILE: tls.caFile })
  await Promise.all([
    (async () => {
      for (const name of ["receiver-install", "client-install", "testing-install", "api-client-install", "api-testing-install"]) await runBlock(name, dirs.consumer)
      phase("consumer installed by the manual's commands")
    })(),
    // docs/operations.md, "Installing in production": every command but `svc start` runs here; that one is the server.
    (async () => {
      const production = block("production-install")
      const commands = commandsOf(production.code)
      assert.deepStrictEqual(commands.filter((command) => command.startsWith("npx svc start")), ["npx svc start"], where(production))
      for (const command of commands.filter((c) => c !== "npx svc start")) {
        const out = ok(await runAsync("bash", ["-c", command], dirs.production, serverEnv), `${where(production)}: ${command}`)
        if (command.includes("--version")) versionShown = out.trim()
      }
      server = spawn("bash", ["-c", "npx svc start"], { cwd: dirs.production, env: serverEnv, detached: true })
      server.stdout!.on("data", (chunk) => (serverLog += chunk))
      server.stderr!.on("data", (chunk) => (serverLog += chunk))
      await waitFor(`svc start (${serverLog})`, 60_000, async () => ((await fetch(`${serverUrl}/health`)).ok ? true : undefined))
      phase("the server installed and started as docs/operations.md says")
    })(),
    // The client on the machine's Node and npm (20 here): the client says Node >= 20.
    runBlock("client-install", dirs.clientOnly, machineEnv()),
    runBlock("receiver-install", dirs.receiverOnly)
  ])

  const cli = (...args: Array<string>) => JSON.parse(ok(run("npx", ["--no-install", "svc", ...args, "--json"], dirs.production, serverEnv), `svc ${args.join(" ")}`))
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
}, 400_000)

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
}, 180_000) // the servers' drain, then five projects' node_modules removed from a busy disk

describe("svc's packages, installed from their tarballs outside the repository", () => {
  it("svc's own names are never taken from a registry: the lockfiles hold the tarballs for svc and @svc/*, and the test kit installed alone offline installs no svc", async () => {
    for (const dir of [dirs.consumer, dirs.clientOnly, dirs.receiverOnly, dirs.production]) {
      const resolved = svcNamesResolved(dir)
      assert.isNotEmpty(Object.keys(resolved), dir)
      for (const [where, from] of Object.entries(resolved)) assert.match(from, /^file:svc-[a-z-]*0\.2\.0\.tgz$/, `${path.basename(dir)}: ${where} from ${from}`)
    }
    assert.sameMembers(Object.keys(svcNamesResolved(dirs.consumer)), ["node_modules/svc", "node_modules/@svc/client", "node_modules/@svc/receiver", "node_modules/@svc/testing"])
    // Alone and offline: npm would fail (ENOTCACHED) or reach a registry if the kit named svc as something to fetch.
    ok(await runAsync("npm", ["install", "--offline", `./${tarballs_.testing}`], dirs.kitAlone), "the test kit alone, offline")
    assert.isFalse(fs.existsSync(path.join(dirs.kitAlone, "node_modules/svc")), "no svc was installed")
    assert.deepStrictEqual(Object.keys(svcNamesResolved(dirs.kitAlone)), ["node_modules/@svc/testing"])
  })

  it("tsc --strict compiles a consumer of every package's public API (typed errors included) and the manual's samples, and refuses a broken one", () => {
    const result = run(process.execPath, [path.join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"], dirs.consumer)
    const errors = `${result.stdout}${result.stderr}`.split("\n").filter((line) => /error TS\d+/.test(line))
    assert.deepStrictEqual(errors.filter((line) => !line.startsWith("broken.ts")), [], errors.join("\n"))
    // Each wrong line of broken.ts is caught: the packages' types were read, not taken as `any`.
    const lines = new Set(errors.map((line) => Number(/^broken\.ts\((\d+),/.exec(line)?.[1])))
    const wrong = BROKEN_TS.split("\n").flatMap((line, i) => (/^export const wrong/.test(line) ? [i + 1] : []))
    assert.lengthOf(wrong, 6)
    for (const line of wrong) assert.isTrue(lines.has(line), `broken.ts line ${line} compiled:\n${errors.join("\n")}`)
  })

  it("the server installed as docs/operations.md says answers /health, says its version, and brought no dev dependency", async () => {
    const health = await fetch(`${serverUrl}/health`)
    assert.strictEqual(health.status, 200)
    assert.strictEqual(versionShown, `svc v${VERSION}`)
    assert.strictEqual(fs.existsSync(path.join(dirs.production, "node_modules/vitest")), false, "dev dependencies were omitted")
  })

  it("the svc package has no development scripts or fields, and every link of its pages resolves inside the package", () => {
    const installed = path.join(dirs.production, "node_modules/svc")
    const manifest = JSON.parse(fs.readFileSync(path.join(installed, "package.json"), "utf8"))
    for (const field of ["scripts", "devDependencies", "workspaces", "overrides", "allowScripts", "devEngines"]) assert.notProperty(manifest, field)
    const pages = fs.readdirSync(installed, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile() && entry.name.endsWith(".md") && !path.relative(installed, entry.parentPath).split(path.sep).includes("node_modules"))
      .map((entry) => path.relative(installed, path.join(entry.parentPath, entry.name)).split(path.sep).join("/"))
    assert.includeMembers(pages, ["README.md", "CHANGELOG.md", "docs/api.md", "docs/operations.md"])
    const readPage = (page: string) => {
      const file = path.join(installed, page)
      if (!fs.existsSync(file)) return undefined
      return fs.statSync(file).isDirectory() ? "" : fs.readFileSync(file, "utf8")
    }
    const dead = pages.flatMap((page) => linksOf(page, readPage(page)!).flatMap((link) => {
      const why = deadLink(link, readPage)
      return why === undefined ? [] : [`${page}:${link.line} ${why}`]
    }))
    assert.deepStrictEqual(dead, [])
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

  it("the manual's client samples run as written against the server (Node 24 runs them as TypeScript)", () => {
    const env = userEnv({ SVC_URL: serverUrl, SVC_API_KEY: apiKey })
    const example = ok(run(path.join(node24, "node"), ["client-example.ts"], dirs.consumer, env), "packages/client/README.md's example").trim()
    assert.match(example, /^[0-9a-f]{32}: 1 run\(s\) on the first page$/)
    const api = JSON.parse(ok(run(path.join(node24, "node"), ["api-client.ts"], dirs.consumer, env), "docs/api.md's client sample").trim())
    assert.match(api.trace_id, /^[0-9a-f]{32}$/)
    assert.isAtLeast(api.tasks, 1)
  })

  it("the manual's module samples load on Node 24 as they are written (TypeScript, type annotations stripped)", () => {
    const load = MODULE_SAMPLES.map((file) => `await import("./${file}")`).join("; ")
    ok(run(path.join(node24, "node"), ["--input-type=module", "-e", `${load}; console.log("loaded")`], dirs.consumer), "the module samples")
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

  it.runIf(/^v20\./.test(spawnSync("/usr/bin/node", ["--version"], { encoding: "utf8" }).stdout ?? ""))("the client, installed by Node 20's npm as its README says, runs on Node 20 (the machine's)", () => {
    const out = ok(run("/usr/bin/node", ["client.mjs"], dirs.clientOnly, machineEnv({ SVC_URL: serverUrl, SVC_API_KEY: apiKey })), "client.mjs on Node 20")
    const result = JSON.parse(out.trim().split("\n").at(-1)!)
    assert.match(result.node, /^20\./)
    assert.strictEqual(result.feedback, "recorded")
  })

  it("the manual's test-kit files pass with `npx vitest run` and vitest's default settings (no configuration file)", async () => {
    assert.deepStrictEqual(fs.readdirSync(dirs.consumer).filter((name) => /^vite(st)?\.config\./.test(name)), [])
    const [out] = await runBlock("testing-run", dirs.consumer)
    assert.match(out!.replace(/\x1b\[[0-9;]*m/g, ""), /Test Files\s+2 passed/)
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
      const tarball = fs.statSync(path.join(tarballs, tarballs_[key])).size
      const project = key === "client" ? dirs.clientOnly : key === "receiver" ? dirs.receiverOnly : dirs.consumer
      const installed = installedBytes(project, name)
      const packages = closureOf(project, name).size
      return `${name.padEnd(14)} tarball ${megabytes(tarball).padStart(8)}   installed ${megabytes(installed).padStart(8)} (${packages} packages)`
    })
    rows.push(`production server (npm install --omit=dev): ${megabytes(bytesUnder(path.join(dirs.production, "node_modules")))}`)
    console.log(rows.join("\n"))
    assert.strictEqual(closureOf(dirs.receiverOnly, "@svc/receiver").size, 1, "the receiver kit has no dependencies")
  })

  it("every consumer= block of the manual ran here", () => {
    assert.sameMembers([...ranBlocks], [...blocks.keys()], "a block says consumer=<name> but this test does not run it")
  })
})
