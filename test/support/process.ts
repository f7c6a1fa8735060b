/** Run `svc` entry points as real child processes (the CLI, the server). */
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

export interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Node's compile cache for the processes tests start: most of a start is
 * loading and compiling modules (TypeScript included), which the cache
 * cuts by about a third on this machine.
 */
export const compileCache = { NODE_COMPILE_CACHE: path.join(os.tmpdir(), "svc-test-compile-cache") }

/** Runs `node <script> ...args` to completion with extra environment (`undefined`: a variable unset). */
export const runNode = (script: string, args: ReadonlyArray<string>, env: Record<string, string | undefined>) =>
  new Promise<Ran>((resolve, reject) => {
    const child = spawn(process.execPath, [path.resolve(root, script), ...args], {
      cwd: root,
      env: { ...process.env, ...compileCache, ...env, NODE_NO_WARNINGS: "1" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => (stdout += chunk))
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

/**
 * The bundle that the installed `svc` runs (scripts/bundle-cli.ts), which
 * the global setup builds from these sources: `svc` runs the CLI from its
 * `main.js` (`TEST_SVC_CLI`) and `svc start` the server from its `server.js`
 * (`TEST_SVC_SERVER`). A file run without the global setup runs the sources.
 */
export const svcScripts = () => ({
  cli: process.env.TEST_SVC_CLI ?? "src/cli/main.ts",
  server: process.env.TEST_SVC_SERVER ?? "src/main.ts"
})

/** Runs `svc <args>` as installed (`svcScripts`). */
export const cli = (args: ReadonlyArray<string>, env: Record<string, string | undefined>) =>
  runNode(svcScripts().cli, args, env)

/**
 * A new data directory whose database is already migrated: the run's
 * migrated snapshot (`TEST_DATABASE_SNAPSHOT`, test/support/global-setup.ts)
 * unpacked as its `pgdata`. The first process on it opens the database
 * (about 1 CPU-second) instead of running initdb and every migration
 * (about 4). Tests of a first start on an empty directory use an empty one.
 */
export const seededDataDir = (prefix = "svc-seeded-") => dataDirFrom(prefix, process.env.TEST_DATABASE_SNAPSHOT)

/**
 * A new data directory whose database is empty, as initdb leaves it: the
 * run's empty snapshot (`TEST_DATABASE_EMPTY_SNAPSHOT`) unpacked as its
 * `pgdata`, for tests of the embedded database itself on a data folder.
 */
export const emptyDataDir = (prefix: string) => dataDirFrom(prefix, process.env.TEST_DATABASE_EMPTY_SNAPSHOT)

const dataDirFrom = (prefix: string, snapshot: string | undefined) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  fs.mkdirSync(path.join(dir, "pgdata"), { mode: 0o700 })
  if (snapshot !== undefined && snapshot !== "") {
    execFileSync("tar", ["-xf", snapshot, "-C", path.join(dir, "pgdata")], { stdio: "ignore" })
  }
  return dir
}

export interface RunningServer {
  readonly child: ChildProcess
  readonly baseUrl: string
  readonly output: () => string
  /** Resolves with the exit code after the process ends. */
  readonly exited: Promise<number | null>
}

/**
 * The servers tests start keep the embedded database's WebAssembly on V8's
 * baseline compiler, as the CLI does (`src/cli/BaselineWasm.ts`): a server
 * that lives for a few checks never profits from recompiling PostgreSQL's
 * hot functions on V8's background threads, which cost a start about
 * 1.5 CPU-s. Measured on eight files that start servers (both startup
 * files, durability, liveness, both processes files and two browser
 * files), runs alternated, three each: 155-189 CPU-s against 175-199. The test services in the test process itself keep V8's
 * default (their heavier database work came out slower: 162 against 137
 * CPU-s), and so does svc (`npm start`, the benchmarks).
 */
const BASELINE_WASM = ["--no-wasm-dynamic-tiering", "--no-wasm-tier-up"]

/**
 * Starts svc's server (as `svc start` runs it, `svcScripts`; or `script`)
 * and resolves once it logs that it listens. Without the warm-up before
 * listening (`SVC_WARM_START=false`, about 1.5 CPU-s a start) unless `env`
 * asks for it: the tests of the warm-up do (`feedback/warm-start.test.ts`).
 */
export const startServer = (env: Record<string, string>, timeoutMs = 60_000, script = svcScripts().server) =>
  new Promise<RunningServer>((resolve, reject) => {
    const child = spawn(process.execPath, [...BASELINE_WASM, path.resolve(root, script)], {
      cwd: root,
      env: { ...process.env, ...compileCache, PORT: "0", SVC_WARM_START: "false", ...env, NODE_NO_WARNINGS: "1" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)))
    // A server that did not start in time is ended, not left running (and
    // loading the machine) after its test has failed.
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`server did not start:\n${output}`))
    }, timeoutMs)
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      const match = /"message":"svc listening","address":"(http:\/\/[^"]+)"/.exec(output)
      if (match) {
        clearTimeout(timer)
        resolve({ child, baseUrl: match[1]!, output: () => output, exited })
      }
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", (chunk) => (output += chunk.toString()))
    void exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`server exited with ${code}:\n${output}`))
    })
  })

/** Servers stopped with SIGTERM (and awaited) when the scope closes. Started together. */
export const startServers = (env: Record<string, string>, count: number) =>
  Effect.acquireRelease(
    Effect.promise(() => Promise.all(Array.from({ length: count }, () => startServer(env)))),
    (servers) =>
      Effect.promise(async () => {
        for (const server of servers) server.child.kill("SIGTERM")
        await Promise.all(servers.map((server) => server.exited.catch(() => undefined)))
      })
  )

const admin = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  effect.pipe(
    Effect.provide(PgClient.layer({ url: Redacted.make(process.env.TEST_DATABASE_URL!), maxConnections: 1 })),
    Effect.orDie
  )

/** Drops a database of the PostgreSQL server of `TEST_DATABASE_URL`, connections and all. */
export const dropDatabase = (name: string) =>
  admin(SqlClient.SqlClient.use((sql) => sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)))

/**
 * A fresh database on the PostgreSQL server of `TEST_DATABASE_URL` for
 * service processes to share; answers its URL. Dropped, connections and
 * all, when the scope closes.
 */
export const scratchDatabaseUrl = (prefix: string) =>
  Effect.acquireRelease(
    admin(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const name = `${prefix}_${Date.now().toString(36)}`
      yield* sql.unsafe(`CREATE DATABASE ${name}`)
      return name
    })),
    dropDatabase
  ).pipe(Effect.map((name) => {
    const url = new URL(process.env.TEST_DATABASE_URL!)
    url.pathname = `/${name}`
    return url.toString()
  }))
