/**
 * What svc does when it cannot start (real `npm start` and `svc`
 * processes): one JSON log line naming the reason and the setting at
 * fault, never a stack trace nor a setting's value, and an exit code of
 * that reason's own (docs/operations.md, "When it cannot start").
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { onServerRun } from "../../support/databases.ts"
import { freePort } from "../../support/privatePostgres.ts"
import { cli, type Ran, runNode, seededDataDir, startServer, svcScripts } from "../../support/process.ts"

const newDataDir = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "svc-refused-")), "data")
const base = () => ({ SVC_DATA_DIR: newDataDir(), DATABASE_URL: "", PORT: "0" })
const MASTER_KEY = Buffer.alloc(32, 7).toString("base64")

/** The one line a refused start printed, parsed; fails unless there is exactly one error line and no stack trace. */
const refusal = (ran: Ran) => {
  const output = ran.stdout + ran.stderr
  assert.notMatch(output, /^\s+at /m, `no stack trace:\n${output}`)
  assert.notInclude(output, "svc listening")
  const errors = output.split("\n").filter((line) => line.includes("ERROR"))
  assert.strictEqual(errors.length, 1, output)
  const line = JSON.parse(errors[0]!) as {
    level: string
    message: string
    reason: string
    setting?: string
    exit_code: number
  }
  assert.strictEqual(line.level, "ERROR")
  assert.strictEqual(line.exit_code, ran.code, "the line states the exit code")
  return line
}

const start = (env: Record<string, string>) => runNode(svcScripts().server, [], env)

describe("a start that cannot succeed", () => {
  it.skipIf(onServerRun)(
    "settings svc cannot use: one JSON line naming the variable, exit 2, without the value",
    async () => {
      const grpc = refusal(
        await start({
          ...base(),
          OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318",
          OTEL_EXPORTER_OTLP_PROTOCOL: "grpc"
        })
      )
      assert.include(grpc.message, "OTEL_EXPORTER_OTLP_PROTOCOL: \"grpc\" is not supported")
      assert.include(grpc.message, "http/json")
      assert.deepInclude(grpc, { reason: "setting", setting: "OTEL_EXPORTER_OTLP_PROTOCOL", exit_code: 2 })

      const token = await start({ ...base(), SVC_METRICS_TOKEN: "too-short" })
      assert.notInclude(token.stdout + token.stderr, "too-short")
      assert.deepInclude(refusal(token), { reason: "setting", setting: "SVC_METRICS_TOKEN", exit_code: 2 })

      assert.deepInclude(refusal(await start({ ...base(), PORT: "eighty" })), {
        reason: "setting",
        setting: "PORT",
        exit_code: 2
      })
      assert.deepInclude(refusal(await start({ ...base(), SVC_LOG_LEVEL: "loud" })), {
        reason: "setting",
        setting: "SVC_LOG_LEVEL",
        exit_code: 2
      })

      const url = await start({
        ...base(),
        DATABASE_URL: "mysql://svc:hunter2@db.example/svc",
        SVC_MASTER_KEY: MASTER_KEY
      })
      assert.notInclude(url.stdout + url.stderr, "hunter2")
      assert.deepInclude(refusal(url), { reason: "setting", setting: "DATABASE_URL", exit_code: 2 })
    },
    120_000
  )

  it.skipIf(onServerRun)(
    "a URL setting svc cannot use: exit 2 naming it, and no password it holds in anything printed",
    async () => {
      // The headers are read when traces are on: with an endpoint.
      const collector = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" }
      const cases: ReadonlyArray<readonly [string, string, Record<string, string>?]> = [
        ["SVC_SMTP_URL", "smtp//svc:hunter2@mail.example.com:587"],
        ["SVC_SMTP_URL", "htp://svc:hunter2@mail.example.com"],
        ["SVC_SMTP_URL", "smtps:/svc:hunter2@mail example.com"],
        ["SVC_SMTP_URL", "smtp://svc:hunter2@mail.example.com?from=nobody"],
        ["OTEL_EXPORTER_OTLP_ENDPOINT", "http//svc:hunter2@collector.example:4318"],
        ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http//svc:hunter2@collector.example:4318/v1/traces"],
        ["OTEL_EXPORTER_OTLP_HEADERS", "Bearer hunter2", collector],
        ["OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%ZZhunter2", collector],
        ["DATABASE_URL", "postgres://svc:hunter2@db example/svc"]
      ]
      for (const [setting, value, more] of cases) {
        const ran = await start({ ...base(), SVC_MASTER_KEY: MASTER_KEY, ...more, [setting]: value })
        assert.notInclude(ran.stdout + ran.stderr, "hunter2", `${setting}=${value}`)
        assert.deepInclude(refusal(ran), { reason: "setting", setting, exit_code: 2 }, `${setting}=${value}`)
      }
      const command = await cli(["orgs", "list"], { ...base(), SVC_SMTP_URL: "htp://svc:hunter2@mail.example.com" })
      assert.strictEqual(command.code, 2)
      assert.notInclude(command.stdout + command.stderr, "hunter2")
      assert.include(command.stderr, "SVC_SMTP_URL")
    },
    180_000
  )

  it.skipIf(onServerRun)("a missing or malformed SVC_MASTER_KEY: exit 3, naming it, without the value", async () => {
    const malformed = await start({ ...base(), SVC_MASTER_KEY: "not-a-key-at-all" })
    assert.notInclude(malformed.stdout + malformed.stderr, "not-a-key-at-all")
    assert.deepInclude(refusal(malformed), {
      message: "SVC_MASTER_KEY must be 32 bytes in base64",
      reason: "master_key",
      setting: "SVC_MASTER_KEY",
      exit_code: 3
    })
    // A server database needs one (several processes share it).
    const missing = refusal(
      await start({ ...base(), DATABASE_URL: `postgres://svc@127.0.0.1:${await freePort()}/svc` })
    )
    assert.deepInclude(missing, { reason: "master_key", setting: "SVC_MASTER_KEY", exit_code: 3 })
  }, 120_000)

  it.skipIf(onServerRun)(
    "a database server that cannot be reached: exit 4, naming DATABASE_URL, without its password; the CLI says the same with the same code",
    async () => {
      const env = {
        ...base(),
        DATABASE_URL: `postgres://svc:hunter2@127.0.0.1:${await freePort()}/svc`,
        SVC_MASTER_KEY: MASTER_KEY
      }
      const server = await start(env)
      assert.notInclude(server.stdout + server.stderr, "hunter2")
      const line = refusal(server)
      assert.deepInclude(line, { reason: "database", setting: "DATABASE_URL", exit_code: 4 })
      assert.include(line.message, "ECONNREFUSED")
      const command = await cli(["orgs", "list"], env)
      assert.strictEqual(command.code, 4)
      assert.strictEqual(command.stdout, "")
      assert.strictEqual(command.stderr, `svc: ${line.message}\n`)
    },
    120_000
  )

  it.skipIf(!process.env.TEST_DATABASE_URL)(
    "on PostgreSQL: a database name the server does not have is exit 4, naming DATABASE_URL",
    async () => {
      const url = new URL(process.env.TEST_DATABASE_URL!)
      url.pathname = "/svc_no_such_database"
      const line = refusal(await start({ ...base(), DATABASE_URL: url.toString(), SVC_MASTER_KEY: MASTER_KEY }))
      assert.deepInclude(line, { reason: "database", setting: "DATABASE_URL", exit_code: 4 })
      assert.include(line.message, "svc_no_such_database")
    },
    120_000
  )

  it.skipIf(onServerRun)(
    "a data directory another server holds: exit 5, naming the holder; a port another process listens on: exit 6, naming PORT",
    async () => {
      const env = { ...base(), SVC_DATA_DIR: seededDataDir("svc-refused-") }
      const first = await startServer(env, 150_000)
      const taken = net.createServer()
      try {
        const held = refusal(await start(env))
        assert.deepInclude(held, { reason: "data_dir_held", setting: "SVC_DATA_DIR", exit_code: 5 })
        assert.include(held.message, `held by process ${first.child.pid}`)

        await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve))
        const port = (taken.address() as net.AddressInfo).port
        // A migrated data directory: the start reaches the port without initdb and every migration.
        const busy = refusal(
          await start({ ...base(), SVC_DATA_DIR: seededDataDir("svc-refused-"), HOST: "127.0.0.1", PORT: String(port) })
        )
        assert.deepInclude(busy, {
          message: `cannot listen on 127.0.0.1:${port} (PORT): another process listens there`,
          reason: "port",
          setting: "PORT",
          exit_code: 6
        })
      } finally {
        taken.close()
        first.child.kill("SIGTERM")
        assert.strictEqual(await first.exited, 0)
      }
    },
    300_000
  )

  it.skipIf(onServerRun)(
    "a HOST that is not an address of this machine, or a name that resolves to none: exit 6, naming HOST (not PORT)",
    async () => {
      for (
        const [host, why] of [["192.0.2.1", "this host has no such address"], [
          "no-such-host.invalid",
          "no address has that host name"
        ]] as const
      ) {
        const refused = refusal(
          await start({ ...base(), SVC_DATA_DIR: seededDataDir("svc-refused-"), HOST: host, PORT: "0" })
        )
        assert.deepInclude(refused, {
          message: `cannot listen on ${host}:0 (HOST): ${why}`,
          reason: "port",
          setting: "HOST",
          exit_code: 6
        }, host)
      }
    },
    300_000
  )
})
