/**
 * The CLI's wall time, as a person at a terminal sees it: `svc --version`
 * and `svc --help` (no database), then `orgs create` and `keys create`
 * with no server running, so that the CLI opens the database itself (the
 * embedded data directory, or the PostgreSQL server with `DATABASE_URL`);
 * on the embedded database also `orgs create` while a server holds the
 * data directory, which the CLI sends to the server's admin channel.
 * Each command runs `BENCH_CLI_RUNS` times (default 7, quick 3) as the
 * installed `svc` runs it: `node bin/svc.js` of each checkout, which runs
 * the build in dist/ (built first when its sources are newer, as `npm
 * install` does); the table gives the median and
 * the spread of its wall time, and the median CPU of its process (threads
 * included). Aims: `--version` and `--help` under 300 ms,
 * `orgs create` and `keys create` under 1 s.
 */
import { execFile } from "node:child_process"
import { randomBytes } from "node:crypto"
import { readFileSync } from "node:fs"
import * as path from "node:path"
import { promisify } from "node:util"
import { freshDatabase } from "../support/db.ts"
import { type Aim, atMost, type BenchContext, type ScenarioResult } from "../support/scenario.ts"
import { median, round, sorted } from "../support/stats.ts"
import { startSvc } from "../support/svc.ts"

const run = promisify(execFile)

const AIMS_MS: Record<string, number> = {
  "--version": 300,
  "--help": 300,
  "orgs create": 1000,
  "keys create": 1000,
  "orgs create (through a running server)": 1000
}

export default async (context: BenchContext): Promise<ScenarioResult> => {
  const runs = Number(process.env.BENCH_CLI_RUNS ?? (context.quick ? 3 : 7))
  const rows: Array<Record<string, string | number>> = []
  const aims: Array<Aim> = []
  for (const checkout of context.checkouts) {
    await run(process.execPath, [path.join(checkout.dir, "scripts/build-packages.ts"), "server", "--if-stale"], {
      cwd: checkout.dir
    })
    const database = await freshDatabase(context.database, `cli_${checkout.label}`)
    try {
      // Nothing of the caller's own svc settings reaches the measured CLI.
      const inherited = Object.fromEntries(
        Object.entries(process.env).filter(([name]) => !/^(DATABASE_URL|PORT|HOST|SVC_.*|OTEL_.*)$/.test(name))
      )
      const env = {
        ...inherited,
        ...(database.kind === "pglite"
          ? { SVC_DATA_DIR: database.dataDir! }
          : { DATABASE_URL: database.url!, SVC_MASTER_KEY: randomBytes(32).toString("base64") })
      }
      // The command's CPU: what this process's reaped children used, before and after.
      const childrenMicros = () => {
        const fields = readFileSync("/proc/self/stat", "utf8").split(") ")[1]!.split(" ")
        return (Number(fields[13]) + Number(fields[14])) * 10_000
      }
      const cli = async (args: ReadonlyArray<string>) => {
        const started = performance.now()
        const cpuBefore = childrenMicros()
        const { stdout } = await run(process.execPath, [path.join(checkout.dir, "bin/svc.js"), ...args], {
          cwd: checkout.dir,
          env
        })
        return { ms: performance.now() - started, cpuMs: (childrenMicros() - cpuBefore) / 1000, stdout }
      }
      // Not measured: the first command creates the database (initdb, migrations).
      const org = JSON.parse((await cli(["orgs", "create", "--name", "first", "--json"])).stdout) as { id: string }
      const commands: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
        ["--version", ["--version"]],
        ["--help", ["--help"]],
        ["orgs create", ["orgs", "create", "--name", "bench", "--json"]],
        ["keys create", ["keys", "create", "--org", org.id, "--scopes", "tasks.read", "--json"]]
      ]
      const measure = async (name: string, args: ReadonlyArray<string>) => {
        const times: Array<number> = []
        const cpu: Array<number> = []
        for (let i = 0; i < runs; i++) {
          const ran = await cli(args)
          times.push(ran.ms)
          cpu.push(ran.cpuMs)
        }
        const ascending = sorted(times)
        const middle = median(times)
        rows.push({
          svc: checkout.label,
          command: `svc ${name}`,
          "median ms": round(middle),
          "min ms": round(ascending[0]!),
          "max ms": round(ascending.at(-1)!),
          "CPU ms (median)": round(median(cpu)),
          runs
        })
        aims.push(atMost(`${checkout.label}: svc ${name}, median`, middle, AIMS_MS[name]!, " ms"))
      }
      for (const [name, args] of commands) await measure(name, args)
      if (database.kind === "pglite") {
        const server = await startSvc(checkout, database, {}, path.join(context.logDir, `cli-${checkout.label}.log`))
        try {
          await measure("orgs create (through a running server)", ["orgs", "create", "--name", "bench", "--json"])
        } finally {
          await server.stop()
        }
      }
    } finally {
      await database.drop()
    }
  }
  return {
    scenario: "cli",
    database: context.database,
    rows,
    aims,
    notes: [
      "Wall time of `node bin/svc.js ...` (the installed `svc`) from spawn to exit, no server running (the CLI opens the database itself), but for the row that says so.",
      "The first `orgs create` (which creates the database) is not measured."
    ]
  }
}
