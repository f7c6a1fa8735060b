/**
 * A PostgreSQL server of the test's own, started from the machine's
 * PostgreSQL binaries in a temporary directory on a free loopback port, so a
 * test can restart it (or crash it) without touching the shared server
 * other test files use. As root, the server runs as the `postgres` user (it
 * refuses root).
 */
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"

/** `runuser` by its path: a PATH without the sbin directories (a CI runner's) must not hide it. */
const runuser = ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"].find((p) => fs.existsSync(p))

/** The newest PostgreSQL `bin` directory on this machine, if any (and, as root, a way to run it as `postgres`). */
export const postgresBin: string | undefined = (() => {
  const root = process.getuid?.() === 0
  if (root && runuser === undefined) return undefined
  try {
    const versions = fs.readdirSync("/usr/lib/postgresql").sort((a, b) => Number(b) - Number(a))
    for (const version of versions) {
      const dir = `/usr/lib/postgresql/${version}/bin`
      if (fs.existsSync(`${dir}/pg_ctl`) && fs.existsSync(`${dir}/initdb`)) return dir
    }
  } catch {
    // No PostgreSQL installed here: the tests that need one are skipped.
  }
  return undefined
})()

const asPostgres = (command: string, args: ReadonlyArray<string>) => {
  const root = process.getuid?.() === 0
  return execFileSync(root ? runuser! : command, root ? ["-u", "postgres", "--", command, ...args] : [...args], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"]
  })
}

/** A loopback TCP port that was free a moment ago. */
export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

export interface PrivatePostgres {
  readonly url: string
  /** Stops the server at once, as a crash would (no checkpoint), and starts it again. */
  readonly crashAndRestart: Effect.Effect<void>
  /** Stops the server at once, as a crash would (no checkpoint); `start` brings it back. */
  readonly crash: Effect.Effect<void>
  /** Stops the server (fast shutdown: sessions are ended); the port then refuses connections. */
  readonly stop: Effect.Effect<void>
  /** Starts the stopped server again and waits until it accepts connections. */
  readonly start: Effect.Effect<void>
}

/** Scoped: the server and its directory are gone when the scope closes. */
export const privatePostgres = Effect.acquireRelease(
  Effect.promise(async () => {
    const bin = postgresBin!
    const dir = asPostgres("mktemp", ["-d", "/tmp/svc-pg-XXXXXX"]).trim()
    const port = await freePort()
    asPostgres(`${bin}/initdb`, ["-D", dir, "-A", "trust", "-U", "postgres", "--no-sync"])
    const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`
    const start = () => asPostgres(`${bin}/pg_ctl`, ["-D", dir, "-o", options, "-l", `${dir}/log`, "-w", "start"])
    start()
    return {
      dir,
      bin,
      url: `postgres://postgres@127.0.0.1:${port}/postgres`,
      crashAndRestart: Effect.sync(() => {
        asPostgres(`${bin}/pg_ctl`, ["-D", dir, "-m", "immediate", "-w", "stop"])
        start()
      }),
      crash: Effect.sync(() => void asPostgres(`${bin}/pg_ctl`, ["-D", dir, "-m", "immediate", "-w", "stop"])),
      stop: Effect.sync(() => void asPostgres(`${bin}/pg_ctl`, ["-D", dir, "-m", "fast", "-w", "stop"])),
      start: Effect.sync(() => void start())
    }
  }),
  (pg) =>
    Effect.sync(() => {
      try {
        asPostgres(`${pg.bin}/pg_ctl`, ["-D", pg.dir, "-m", "immediate", "-w", "stop"])
      } finally {
        fs.rmSync(pg.dir, { recursive: true, force: true })
      }
    })
).pipe(
  Effect.map((pg): PrivatePostgres => ({
    url: pg.url,
    crashAndRestart: pg.crashAndRestart,
    crash: pg.crash,
    stop: pg.stop,
    start: pg.start
  }))
)
