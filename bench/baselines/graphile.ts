/**
 * The queue baseline, a child process of its own: a graphile-worker runner
 * (concurrency = svc's per-endpoint concurrency) whose `send` task makes the
 * same signed POST as the bare sender to the same receiver. Jobs are added
 * by the benchmark (`graphile_worker.add_jobs`, one statement), on the same
 * PostgreSQL server svc uses.
 */
import { createRequire } from "node:module"
import { serve } from "../support/child.ts"
import { signedSender } from "../support/events.ts"

// graphile-worker is not in the repository's install: it lives in
// test/interop's npm project with the other outside libraries svc is
// compared or checked against (`npm ci --prefix test/interop`).
interface Runner {
  stop(): Promise<void>
}
interface GraphileWorker {
  readonly Logger: new(factory: () => (level: string, message: string) => void) => unknown
  run(options: Record<string, unknown>): Promise<Runner>
  runMigrations(options: Record<string, unknown>): Promise<void>
}
const graphile = (): GraphileWorker => {
  try {
    return createRequire(new URL("../../test/interop/package.json", import.meta.url))("graphile-worker")
  } catch (error) {
    throw new Error("the graphile-worker baseline needs it: npm ci --prefix test/interop installs it", { cause: error })
  }
}
const { Logger, run, runMigrations } = graphile()

let runner: Runner | undefined
let sender: ReturnType<typeof signedSender> | undefined

// Warnings and errors only: per-job info lines are not what is measured.
const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") process.stderr.write(`[graphile] ${message}\n`)
})

serve({
  start: async (
    args: { connectionString: string; origin: string; ca: string; concurrency: number; path: string; secret: string }
  ) => {
    sender = signedSender(args.origin, args.ca, args.concurrency)
    await runMigrations({ connectionString: args.connectionString, logger })
    runner = await run({
      connectionString: args.connectionString,
      concurrency: args.concurrency,
      maxPoolSize: args.concurrency + 2,
      noHandleSignals: true,
      logger,
      taskList: {
        send: async (payload: unknown) => {
          const { id, body } = payload as { id: string; body: string }
          await sender!.send(args.path, args.secret, { id, body })
        }
      }
    })
  },
  close: async () => {
    await runner?.stop()
    await sender?.close()
  }
})
