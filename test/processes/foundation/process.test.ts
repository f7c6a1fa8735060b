/**
 * The service and the CLI as a user runs them: real processes on an
 * embedded data directory (and on the PostgreSQL server when
 * TEST_DATABASE_URL is set).
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, beforeAll } from "vitest"
import { VERSION } from "../../../src/api/Version.ts"
import { adminSocketPath } from "../../../src/cli/Admin.ts"
import { Database } from "../../../src/database/Database.ts"
import { KEY_CACHE_TTL } from "../../../src/identity/Identity.ts"
import { holdDataDir, isHeld } from "../../../src/platform/DataDir.ts"
import { onServerRun } from "../../support/databases.ts"
import { cli, root, type RunningServer, seededDataDir, startServer } from "../../support/process.ts"

const sha256 = (value: string) => createHash("sha256").update(value).digest("hex")

const json = (stdout: string) => {
  const lines = stdout.trim().split("\n")
  assert.strictEqual(lines.length, 1, `expected one JSON line, got: ${stdout}`)
  return JSON.parse(lines[0]!)
}

/** A POST whose body arrives slowly, so it is in flight when the server is told to stop. */
const slowPost = (url: string, key: string, body: string, chunks: number, gapMs: number) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    const request = http.request(url, {
      method: "POST",
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body)
      }
    }, (response) => {
      let text = ""
      response.on("data", (chunk) => (text += chunk))
      response.on("end", () => resolve({ status: response.statusCode ?? 0, body: text }))
    })
    request.on("error", reject)
    const size = Math.ceil(body.length / chunks)
    let i = 0
    const next = () => {
      if (i >= body.length) return request.end()
      request.write(body.slice(i, i + size))
      i += size
      setTimeout(next, gapMs)
    }
    next()
  })

describe.skipIf(onServerRun)("the CLI and the server on the embedded database", () => {
  const dataDir = seededDataDir("svc-process-")
  const env = { SVC_DATA_DIR: dataDir, DATABASE_URL: "" }

  // Each is a whole process start (about a second of CPU on its own):
  // several at once, each checked, with room for a loaded machine.
  it("prints --help for every command, and --version the version of svc", async () => {
    const commands = [
      [],
      ["start"],
      ["orgs"],
      ["orgs", "create"],
      ["orgs", "list"],
      ["keys"],
      ["keys", "create"],
      ["keys", "list"],
      ["keys", "revoke"],
      ["notifications"],
      ["notifications", "reviewer-email"]
    ]
    const pending = [...commands]
    const checked: Array<string> = []
    await Promise.all(Array.from({ length: 3 }, async () => {
      for (let command = pending.shift(); command !== undefined; command = pending.shift()) {
        const result = await cli([...command, "--help"], env)
        assert.strictEqual(result.code, 0, `${command.join(" ")} --help: ${result.stderr}`)
        assert.include(result.stdout, "USAGE", `${command.join(" ")} --help`)
        checked.push(command.join(" "))
      }
    }))
    assert.sameMembers(checked, commands.map((command) => command.join(" ")))
    const version = await cli(["--version"], env)
    assert.strictEqual(version.stdout.trim(), `svc v${VERSION}`)
  }, 180_000)

  // The tests below start several processes each: minutes, not seconds,
  // on a loaded machine.
  it("issues organizations and keys without a server; the key is shown once and stored as a hash", async () => {
    const org = json((await cli(["orgs", "create", "--name", "acme", "--json"], env)).stdout)
    assert.deepStrictEqual(Object.keys(org).sort(), ["created_at", "id", "name"])
    assert.strictEqual(org.name, "acme")
    const created = await cli(["keys", "create", "--org", org.id, "--scopes", "tasks.write,tasks.read", "--json"], env)
    assert.strictEqual(created.code, 0, created.stderr)
    const key = json(created.stdout)
    assert.deepStrictEqual(Object.keys(key).sort(), ["id", "key", "org_id", "scopes"])
    assert.match(key.key, /^svc_[A-Za-z0-9_-]{43}$/)
    assert.deepStrictEqual(key.scopes, ["tasks.write", "tasks.read"])

    const listed = await cli(["keys", "list", "--org", org.id, "--json"], env)
    assert.notInclude(listed.stdout, key.key)
    assert.strictEqual(json(listed.stdout).keys[0].id, key.id)

    const bad = await cli(["keys", "create", "--org", org.id, "--scopes", "tasks.write,root", "--json"], env)
    assert.notStrictEqual(bad.code, 0)
    assert.include(bad.stdout + bad.stderr, "unknown scope root")

    // What is stored: the hash, never the key.
    await Effect.runPromise(
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<
          { key_hash: string; dump: string }
        >`SELECT key_hash, row_to_json(api_keys)::text AS dump FROM api_keys`
        assert.strictEqual(rows.length, 1)
        assert.strictEqual(rows[0]!.key_hash, sha256(key.key))
        assert.notInclude(rows[0]!.dump, key.key.slice(4))
      }).pipe(Effect.provide(Database.embedded(dataDir)), Effect.scoped)
    )
  }, 300_000)

  it(
    "serves on the data dir; the CLI goes through the running server's admin channel; SIGTERM drains and exits 0; data survives a restart",
    async () => {
      const server = await startServer(env, 150_000)
      try {
        const orgs = json((await cli(["orgs", "list", "--json"], env)).stdout).orgs
        assert.strictEqual(orgs.length, 1)
        const key = json(
          (await cli(["keys", "create", "--org", orgs[0].id, "--scopes", "tasks.write,tasks.read", "--json"], env))
            .stdout
        )
        const created = await fetch(`${server.baseUrl}/v1/tasks`, {
          method: "POST",
          headers: { authorization: `Bearer ${key.key}`, "content-type": "application/json" },
          body: JSON.stringify({ name: "kept", answer_schema: { type: "object" } })
        })
        assert.strictEqual(created.status, 201)

        const revoked = await cli(["keys", "revoke", "--id", key.id, "--json"], env)
        assert.isString(json(revoked.stdout).revoked_at)
        // Another process revoked it: the server refuses it within its key cache's lifetime.
        const revokedAt = Date.now()
        while (
          (await fetch(`${server.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${key.key}` } })).status !==
            401
        ) {
          assert.isBelow(Date.now() - revokedAt, Duration.toMillis(KEY_CACHE_TTL) + 3_000, "revoked key still accepted")
          await new Promise((resolve) => setTimeout(resolve, 50))
        }

        const live = json(
          (await cli(["keys", "create", "--org", orgs[0].id, "--scopes", "tasks.write,tasks.read", "--json"], env))
            .stdout
        )
        const body = JSON.stringify({
          name: "in flight",
          answer_schema: { type: "object", description: "x".repeat(20_000) }
        })
        const inFlight = slowPost(`${server.baseUrl}/v1/tasks`, live.key, body, 10, 150)
        await new Promise((resolve) => setTimeout(resolve, 400))
        server.child.kill("SIGTERM")
        const answer = await inFlight
        assert.strictEqual(answer.status, 201, answer.body)
        assert.strictEqual(await server.exited, 0)
        // One line says it stopped, and why, like the start's: after the request in flight got its answer.
        const lines = server.output().split("\n").filter((line) => line.startsWith("{")).map((line) =>
          JSON.parse(line) as Record<string, unknown>
        )
        const stopped = lines.filter((line) => line.message === "svc stopped")
        assert.strictEqual(stopped.length, 1, server.output())
        assert.deepInclude(stopped[0], {
          level: "INFO",
          address: server.baseUrl,
          reason: "SIGTERM",
          signal: "SIGTERM",
          exit_code: 0
        })
        assert.strictEqual(lines.at(-1)?.message, "svc stopped", "the last line")
        // Stopped: the data dir is free and the admin socket gone.
        assert.isFalse(isHeld(dataDir))
        assert.isFalse(fs.existsSync(adminSocketPath(dataDir)))

        const again = await startServer(env, 150_000)
        try {
          const list = await fetch(`${again.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${live.key}` } })
          const names = ((await list.json()) as { tasks: Array<{ name: string }> }).tasks.map((t) => t.name).sort()
          assert.deepStrictEqual(names, ["in flight", "kept"])
        } finally {
          again.child.kill("SIGTERM")
          assert.strictEqual(await again.exited, 0)
        }
      } finally {
        server.child.kill("SIGKILL")
      }
    },
    300_000
  )

  // The threads a command started, seen by a module preloaded into it.
  const threads = async (args: ReadonlyArray<string>, databaseUrl?: string) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "svc-threads-"))
    const log = path.join(dir, "log")
    try {
      const ran = await cli(args, {
        ...env,
        DATABASE_URL: databaseUrl,
        NODE_OPTIONS: `--import=${pathToFileURL(path.join(root, "test/support/worker-probe.ts"))}`,
        SVC_TEST_WORKER_LOG: log
      })
      assert.strictEqual(ran.code, 0, ran.stderr)
      return fs.existsSync(log) ? fs.readFileSync(log, "utf8").trim().split("\n") : []
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }

  it("a command that runs without a server starts the embedded database first", async () => {
    // The embedded database's worker, started by the entry point before the
    // CLI loads (on V8's baseline compiler): with DATABASE_URL unset, and
    // set empty, which the configuration also reads as the embedded database.
    assert.deepStrictEqual(await threads(["orgs", "list", "--json"]), ["early"])
    assert.deepStrictEqual(await threads(["orgs", "list", "--json"], ""), ["early"])
  }, 300_000)

  // One server for these checks (each start is a couple of CPU-seconds).
  describe("while a server runs on the data dir", () => {
    let server: RunningServer
    beforeAll(async () => {
      server = await startServer(env, 150_000)
    }, 200_000)
    afterAll(async () => {
      server.child.kill("SIGTERM")
      assert.strictEqual(await server.exited, 0)
    })

    it("a command the server answers starts no embedded database of its own", async () => {
      assert.deepStrictEqual(await threads(["orgs", "list", "--json"]), [])
    }, 300_000)

    it("a second server refuses the data dir, saying which process holds it", async () => {
      const second = await startServer(env, 150_000).then(
        () => assert.fail("second server started"),
        (error: Error) => error.message
      )
      assert.include(second, `held by process ${server.child.pid}`)
    }, 300_000)

    it("two CLIs at once: both go through its admin channel, both succeed, both results are kept", async () => {
      const [a, b] = await Promise.all([
        cli(["orgs", "create", "--name", "twin-a", "--json"], env),
        cli(["orgs", "create", "--name", "twin-b", "--json"], env)
      ])
      assert.strictEqual(a.code, 0, a.stderr)
      assert.strictEqual(b.code, 0, b.stderr)
      const orgA = json(a.stdout)
      const orgB = json(b.stdout)
      assert.notStrictEqual(orgA.id, orgB.id)
      const [key, link] = await Promise.all([
        cli(["keys", "create", "--org", orgA.id, "--scopes", "tasks.read", "--json"], env),
        cli(["console", "login", "--org", orgB.id, "--preset", "reviewer", "--name", "Ada", "--json"], env)
      ])
      assert.strictEqual(key.code, 0, key.stderr)
      assert.strictEqual(link.code, 0, link.stderr)
      assert.include(json(link.stdout).url, "/console/sign-in#")
      // The server held the data folder throughout, and serves what they made.
      assert.isTrue(isHeld(dataDir))
      const tasks = await fetch(`${server.baseUrl}/v1/tasks`, {
        headers: { authorization: `Bearer ${json(key.stdout).key}` }
      })
      assert.strictEqual(tasks.status, 200)
      const names = json((await cli(["orgs", "list", "--json"], env)).stdout).orgs.map((org: { name: string }) =>
        org.name
      )
      assert.includeMembers(names, ["twin-a", "twin-b"])
    }, 300_000)
  })

  it(
    "two CLIs at once with no server: the second waits for the first's hold on the data folder (or, losing the race to take it, is refused naming the holder); neither hangs, nothing made is lost",
    async () => {
      assert.isFalse(isHeld(dataDir))
      const results = await Promise.all([
        cli(["orgs", "create", "--name", "solo-a", "--json"], env),
        cli(["orgs", "create", "--name", "solo-b", "--json"], env)
      ])
      const made: Array<string> = []
      for (const result of results) {
        if (result.code === 0) made.push(json(result.stdout).name)
        else {
          assert.strictEqual(result.stdout, "")
          assert.match(result.stderr, /^svc: the embedded database in \S+ is held by process \d+; [^\n]*\n$/)
        }
      }
      assert.isAtLeast(made.length, 1)
      assert.isFalse(isHeld(dataDir))
      const names = json((await cli(["orgs", "list", "--json"], env)).stdout).orgs.map((org: { name: string }) =>
        org.name
      )
      assert.includeMembers(names, made)
    },
    300_000
  )

  it(
    "a CLI waits for another process's hold on the data folder, and is refused naming that process once the wait is over: it never hangs",
    async () => {
      const started = Date.now()
      const refused = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
        yield* holdDataDir(dataDir)
        // The wait is `SVC_CLI_HOLD_WAIT` (30 s by default): 3 s here.
        return yield* Effect.promise(() =>
          cli(["orgs", "create", "--name", "never", "--json"], { ...env, SVC_CLI_HOLD_WAIT: "3s" })
        )
      })))
      const waited = Date.now() - started
      assert.notStrictEqual(refused.code, 0)
      // One line on stderr saying who holds it; nothing on stdout.
      assert.strictEqual(refused.stdout, "")
      assert.match(
        refused.stderr,
        new RegExp(`^svc: the embedded database in \\S+ is held by process ${process.pid}; [^\\n]*\\n$`)
      )
      assert.isAtLeast(waited, 3_000)
      assert.isBelow(waited, 120_000)
      assert.isFalse(isHeld(dataDir))
      const names = json((await cli(["orgs", "list", "--json"], env)).stdout).orgs.map((org: { name: string }) =>
        org.name
      )
      assert.notInclude(names, "never")
    },
    300_000
  )
})

describe.runIf(process.env.TEST_DATABASE_URL)("the CLI and the server on a PostgreSQL server", () => {
  it.effect("migrate an empty database, then start again on the migrated one", () =>
    Effect.gen(function*() {
      const admin = process.env.TEST_DATABASE_URL!
      const name = `svc_proc_${Date.now().toString(36)}`
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(`CREATE DATABASE ${name}`)
      try {
        const url = new URL(admin)
        url.pathname = `/${name}`
        const env = { DATABASE_URL: url.toString(), SVC_MASTER_KEY: Buffer.alloc(32, 7).toString("base64") }
        const org = json((yield* Effect.promise(() => cli(["orgs", "create", "--name", "pg", "--json"], env))).stdout)
        for (let round = 0; round < 2; round++) {
          const server = yield* Effect.promise(() => startServer(env))
          const ready = yield* Effect.promise(() => fetch(`${server.baseUrl}/ready`))
          assert.strictEqual(ready.status, 200)
          server.child.kill("SIGTERM")
          assert.strictEqual(yield* Effect.promise(() => server.exited), 0)
        }
        const orgs = json((yield* Effect.promise(() => cli(["orgs", "list", "--json"], env))).stdout).orgs
        assert.deepStrictEqual(orgs.map((o: { id: string }) => o.id), [org.id])
      } finally {
        yield* sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      }
    }).pipe(Effect.provide(Layer.orDie(Layer.suspend(() =>
      PgClient.layer({ url: Redacted.make(process.env.TEST_DATABASE_URL!), maxConnections: 1 })
    )))), 120_000)
})
