/**
 * The queue baseline, a child process of its own: a graphile-worker runner
 * (concurrency = svc's per-endpoint concurrency) whose `send` task makes the
 * same signed POST as the bare sender to the same receiver. Jobs are added
 * by the benchmark (`graphile_worker.add_jobs`, one statement), on the same
 * PostgreSQL server svc uses.
 */
import { Logger, run, runMigrations, type Runner } from "graphile-worker"
import { serve } from "../support/child.ts"
import { signedSender } from "../support/events.ts"

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
        send: async (payload) => {
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
