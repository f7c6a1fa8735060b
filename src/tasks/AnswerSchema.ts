/**
 * Answer schemas: a task's JSON Schema, checked when the task is created and
 * applied to every correction of feedback on its runs.
 *
 * Both are tenant input that can cost a lot: a `pattern` that backtracks
 * catastrophically, `uniqueItems` over a long untyped array (every pair is
 * compared), a large schema that takes seconds to compile. So:
 *
 * - before anything else, a schema is measured against documented limits
 *   (`SVC_ANSWER_SCHEMA_MAX_*`: serialized size, nesting depth, number of
 *   subschemas, pattern length) by one iterative walk that stops at the
 *   first limit exceeded: `400 ANSWER_SCHEMA_TOO_COMPLEX` naming it;
 * - compiling and validating run in worker threads (`validation-worker.ts`),
 *   never on the event loop. Each request has a deadline
 *   (`SVC_ANSWER_VALIDATION_TIMEOUT`, at most 1 s) and a heap
 *   (`SVC_ANSWER_VALIDATION_HEAP_MB`); a worker that misses either is
 *   terminated and replaced, and the request is refused naming the limit;
 * - one organization has at most one request in a worker at a time and at
 *   most `SVC_ANSWER_VALIDATION_QUEUE_PER_ORG` waiting (then 429); waiting
 *   organizations take turns. There are at least two workers, so one
 *   organization's expensive checks never hold up the others';
 * - compiled validators live only in each worker's cache, bounded by count
 *   (`SVC_ANSWER_VALIDATION_CACHE`, least recently used dropped) and
 *   compiled again on demand: the worker asks for the schema when it does
 *   not hold the task's validator, so this process keeps no schemas either.
 *
 * The pool is written by hand: what it needs (a deadline that terminates a
 * worker mid-computation, one slot per organization, turns between
 * organizations) is what general worker-pool libraries leave out.
 */
import { Context, Data, Effect, Layer } from "effect"
import { Worker } from "node:worker_threads"
import { SvcConfig } from "../platform/Config.ts"
import { appendPath, type SchemaViolation } from "./SchemaCompiler.ts"
import type { WorkerReply, WorkerRequest } from "./validation-worker.ts"

export { appendPath, pointerToPath, type SchemaViolation } from "./SchemaCompiler.ts"

// ---------------------------------------------------------------------------
// Limits checked before compiling

export interface SchemaLimits {
  readonly maxBytes: number
  readonly maxDepth: number
  readonly maxSubschemas: number
  readonly maxPatternLength: number
}

/** A schema or a check over a limit: `limit` is the `SVC_*` setting, `field` a path inside the schema. */
export class OverLimit extends Data.TaggedError("OverLimit")<{
  readonly limit: string
  readonly value: number
  readonly field: string
  readonly message: string
}> {}

/** The schema is not usable JSON Schema (what Ajv says is wrong). */
export class SchemaUnusable extends Data.TaggedError("SchemaUnusable")<{ readonly message: string }> {}

/** Too many checks of this organization are waiting. */
export class ValidationQueueFull extends Data.TaggedError("ValidationQueueFull")<{
  readonly limit: string
  readonly value: number
}> {}

const scalarBytes = (value: unknown) =>
  typeof value === "string" ? value.length + 2 : typeof value === "number" ? String(value).length : typeof value === "boolean" ? 5 : 4

/**
 * The first limit `schema` exceeds, or `undefined`. One iterative walk that
 * stops as soon as a limit is exceeded, so its cost is bounded by the
 * limits, not by the input. Size is the length of the compact JSON text
 * (escapes not counted); depth counts nested objects and arrays (the schema
 * itself is 1); every object counts as a subschema; patterns are the values
 * of `pattern` and the member names of `patternProperties`.
 */
export const measureSchema = (schema: unknown, limits: SchemaLimits, root = "answer_schema"): OverLimit | undefined => {
  let bytes = 0
  let objects = 0
  const stack: Array<{ readonly value: unknown; readonly depth: number; readonly path: string }> = [{ value: schema, depth: 1, path: root }]
  const over = (limit: string, value: number, field: string, message: string) => new OverLimit({ limit, value, field, message })
  while (stack.length > 0) {
    const { value, depth, path } = stack.pop()!
    if (typeof value !== "object" || value === null) {
      bytes += scalarBytes(value)
    } else {
      if (depth > limits.maxDepth) {
        return over("SVC_ANSWER_SCHEMA_MAX_DEPTH", limits.maxDepth, path, `nests deeper than ${limits.maxDepth} levels`)
      }
      if (Array.isArray(value)) {
        bytes += 2 + value.length
        for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], depth: depth + 1, path: `${path}[${i}]` })
      } else {
        objects += 1
        if (objects > limits.maxSubschemas) {
          return over("SVC_ANSWER_SCHEMA_MAX_SUBSCHEMAS", limits.maxSubschemas, path, `has more than ${limits.maxSubschemas} subschemas (objects)`)
        }
        bytes += 2
        const entries = Object.entries(value)
        for (let i = entries.length - 1; i >= 0; i--) {
          const [key, child] = entries[i]!
          bytes += key.length + 4
          if (bytes > limits.maxBytes) break
          const childPath = appendPath(path, key)
          if (key === "pattern" && typeof child === "string" && child.length > limits.maxPatternLength) {
            return over("SVC_ANSWER_SCHEMA_MAX_PATTERN_LENGTH", limits.maxPatternLength, childPath, `is a pattern longer than ${limits.maxPatternLength} characters`)
          }
          if (key === "patternProperties" && typeof child === "object" && child !== null && !Array.isArray(child)) {
            const long = Object.keys(child).find((pattern) => pattern.length > limits.maxPatternLength)
            if (long !== undefined) {
              return over("SVC_ANSWER_SCHEMA_MAX_PATTERN_LENGTH", limits.maxPatternLength, childPath, `holds a pattern longer than ${limits.maxPatternLength} characters`)
            }
          }
          stack.push({ value: child, depth: depth + 1, path: childPath })
        }
      }
    }
    if (bytes > limits.maxBytes) {
      return over("SVC_ANSWER_SCHEMA_MAX_BYTES", limits.maxBytes, root, `is larger than ${limits.maxBytes} bytes as JSON`)
    }
  }
  return undefined
}

// ---------------------------------------------------------------------------
// The worker pool

export interface PoolSettings {
  readonly workers: number
  readonly timeoutMs: number
  readonly heapMb: number
  readonly cacheEntries: number
  readonly queuedPerOrg: number
}

type Request = WorkerRequest extends infer R ? R extends { readonly id: number } ? Omit<R, "id"> : never : never

type Outcome =
  | { readonly _tag: "Reply"; readonly reply: WorkerReply }
  | { readonly _tag: "Timeout" }
  | { readonly _tag: "Crashed"; readonly outOfMemory: boolean }

interface Job {
  readonly id: number
  readonly orgId: string
  readonly request: Request
  readonly done: (outcome: Outcome) => void
  timer?: ReturnType<typeof setTimeout>
}

interface Slot {
  readonly worker: Worker
  ready: boolean
  job: Job | undefined
  readonly stats: Map<number, (reply: WorkerReply) => void>
}

const WORKER_URL = new URL("./validation-worker.ts", import.meta.url)

export const makePool = (settings: PoolSettings) => {
  const slots: Array<Slot> = []
  /** Waiting jobs per organization; the map's order is the order of turns. */
  const queues = new Map<string, Array<Job>>()
  /** Organizations with a job in a worker now. */
  const running = new Set<string>()
  let nextId = 1
  let closed = false
  let replaced = 0

  const spawn = (index: number) => {
    const worker = new Worker(WORKER_URL, {
      workerData: { cacheEntries: settings.cacheEntries },
      resourceLimits: { maxOldGenerationSizeMb: settings.heapMb },
      stdout: false,
      stderr: false
    })
    worker.unref()
    const slot: Slot = { worker, ready: false, job: undefined, stats: new Map() }
    slots[index] = slot
    worker.on("message", (message: WorkerReply | "ready") => {
      if (message === "ready") {
        slot.ready = true
        pump()
        return
      }
      const statsWaiter = slot.stats.get(message.id)
      if (statsWaiter !== undefined) {
        slot.stats.delete(message.id)
        statsWaiter(message)
        return
      }
      if (slot.job !== undefined && slot.job.id === message.id) finish(slot, { _tag: "Reply", reply: message })
    })
    const lost = (outOfMemory: boolean) => {
      if (slots[index] !== slot) return
      const job = slot.job
      slot.job = undefined
      replace(index)
      if (job !== undefined) settle(job, { _tag: "Crashed", outOfMemory })
    }
    worker.on("error", (error: Error & { code?: string }) => lost(error.code === "ERR_WORKER_OUT_OF_MEMORY"))
    worker.on("exit", () => lost(false))
  }

  const replace = (index: number) => {
    const old = slots[index]!
    for (const waiter of old.stats.values()) waiter({ id: 0, _tag: "Stats", cached: 0, registered: 0 })
    replaced += 1
    if (closed) return
    spawn(index)
    void old.worker.terminate()
  }

  const settle = (job: Job, outcome: Outcome) => {
    if (job.timer !== undefined) clearTimeout(job.timer)
    running.delete(job.orgId)
    job.done(outcome)
    pump()
  }

  const finish = (slot: Slot, outcome: Outcome) => {
    const job = slot.job!
    slot.job = undefined
    settle(job, outcome)
  }

  const nextJob = (): Job | undefined => {
    for (const [orgId, queue] of queues) {
      if (running.has(orgId)) continue
      const job = queue.shift()!
      // Its turn is used: the organization goes to the back of the line.
      queues.delete(orgId)
      if (queue.length > 0) queues.set(orgId, queue)
      return job
    }
    return undefined
  }

  const pump = () => {
    if (closed) return
    slots.forEach((slot, index) => {
      if (!slot.ready || slot.job !== undefined) return
      const job = nextJob()
      if (job === undefined) return
      slot.job = job
      running.add(job.orgId)
      job.timer = setTimeout(() => {
        if (slots[index] !== slot || slot.job !== job) return
        // Terminating is the only way to stop a regular expression or a
        // comparison loop that is running.
        slot.job = undefined
        replace(index)
        settle(job, { _tag: "Timeout" })
      }, settings.timeoutMs)
      slot.worker.postMessage({ ...job.request, id: job.id })
    })
  }

  /** Queues `request` for `orgId`; answers a way to withdraw it while it waits, or `undefined` when the queue is full. */
  const submit = (orgId: string, request: Request, done: (outcome: Outcome) => void): (() => void) | undefined => {
    const queue = queues.get(orgId) ?? []
    if (queue.length >= settings.queuedPerOrg) return undefined
    const job: Job = { id: nextId++, orgId, request, done }
    queue.push(job)
    if (!queues.has(orgId)) queues.set(orgId, queue)
    pump()
    return () => {
      const waiting = queues.get(orgId)
      const at = waiting?.indexOf(job) ?? -1
      if (at < 0) return
      waiting!.splice(at, 1)
      if (waiting!.length === 0) queues.delete(orgId)
    }
  }

  /** What each worker holds (for tests and operators): compiled validators kept, schemas in Ajv's registries. */
  const stats = () =>
    Promise.all(slots.map((slot) =>
      new Promise<{ cached: number; registered: number }>((resolve) => {
        const id = nextId++
        slot.stats.set(id, (reply) => resolve(reply._tag === "Stats" ? { cached: reply.cached, registered: reply.registered } : { cached: 0, registered: 0 }))
        slot.worker.postMessage({ op: "stats", id } satisfies WorkerRequest)
      })
    ))

  const close = () => {
    closed = true
    const pending = [...slots.flatMap((slot) => slot.job === undefined ? [] : [slot.job]), ...[...queues.values()].flat()]
    queues.clear()
    for (const slot of slots) {
      slot.job = undefined
      void slot.worker.terminate()
    }
    for (const job of pending) {
      if (job.timer !== undefined) clearTimeout(job.timer)
      job.done({ _tag: "Crashed", outOfMemory: false })
    }
  }

  for (let index = 0; index < settings.workers; index++) spawn(index)

  return { submit, stats, close, replacedWorkers: () => replaced }
}

// ---------------------------------------------------------------------------
// The service

export class AnswerSchemas extends Context.Service<AnswerSchemas, {
  /**
   * Checks a new task's schema: limits first, then compiles it (kept under
   * `key`, the new task's id). `SchemaUnusable` when it is not usable JSON
   * Schema, `OverLimit` naming the limit it exceeds.
   */
  readonly check: (orgId: string, key: string, schema: unknown) => Effect.Effect<void, SchemaUnusable | OverLimit | ValidationQueueFull>
  /**
   * Validates `value` against the schema of task `key`; `schema` is read
   * only when the worker does not hold the task's validator. `OverLimit`
   * when the check goes over its time or memory budget.
   */
  readonly validate: (
    orgId: string,
    key: string,
    schema: Effect.Effect<unknown>,
    value: unknown
  ) => Effect.Effect<ReadonlyArray<SchemaViolation>, OverLimit | ValidationQueueFull>
  /** What each worker holds: compiled validators kept and schemas in Ajv's registries. */
  readonly stats: Effect.Effect<ReadonlyArray<{ readonly cached: number; readonly registered: number }>>
  /** Workers terminated and replaced so far (over budget, out of memory). */
  readonly replacedWorkers: () => number
}>()("svc/tasks/AnswerSchemas") {
  static readonly layer = Layer.effect(
    AnswerSchemas,
    Effect.gen(function*() {
      const config = yield* SvcConfig
      const limits: SchemaLimits = {
        maxBytes: config.answerSchemaMaxBytes,
        maxDepth: config.answerSchemaMaxDepth,
        maxSubschemas: config.answerSchemaMaxSubschemas,
        maxPatternLength: config.answerSchemaMaxPatternLength
      }
      const pool = yield* Effect.acquireRelease(
        Effect.sync(() =>
          makePool({
            workers: config.answerValidationWorkers,
            timeoutMs: config.answerValidationTimeoutMs,
            heapMb: config.answerValidationHeapMb,
            cacheEntries: config.answerValidationCacheEntries,
            queuedPerOrg: config.answerValidationQueuePerOrg
          })
        ),
        (pool) => Effect.sync(pool.close)
      )

      const overBudget = (outcome: Outcome, field: string, what: string): OverLimit =>
        outcome._tag === "Crashed" && outcome.outOfMemory
          ? new OverLimit({
            limit: "SVC_ANSWER_VALIDATION_HEAP_MB",
            value: config.answerValidationHeapMb,
            field,
            message: `${what} needed more than ${config.answerValidationHeapMb} MB`
          })
          : new OverLimit({
            limit: "SVC_ANSWER_VALIDATION_TIMEOUT",
            value: config.answerValidationTimeoutMs,
            field,
            message: `${what} took longer than ${config.answerValidationTimeoutMs} ms`
          })

      const run = (orgId: string, request: Request) =>
        Effect.callback<Outcome, ValidationQueueFull>((resume) => {
          const withdraw = pool.submit(orgId, request, (outcome) => resume(Effect.succeed(outcome)))
          if (withdraw === undefined) {
            resume(Effect.fail(new ValidationQueueFull({
              limit: "SVC_ANSWER_VALIDATION_QUEUE_PER_ORG",
              value: config.answerValidationQueuePerOrg
            })))
            return
          }
          return Effect.sync(withdraw)
        })

      const check = Effect.fn("AnswerSchemas.check")(function*(orgId: string, key: string, schema: unknown) {
        const exceeded = measureSchema(schema, limits)
        if (exceeded !== undefined) return yield* exceeded
        const outcome = yield* run(orgId, { op: "check", key, schema })
        if (outcome._tag !== "Reply") return yield* overBudget(outcome, "answer_schema", "compiling the schema")
        if (outcome.reply._tag === "Unusable") return yield* new SchemaUnusable({ message: outcome.reply.message })
      })

      const validate = Effect.fn("AnswerSchemas.validate")(function*(
        orgId: string,
        key: string,
        schema: Effect.Effect<unknown>,
        value: unknown
      ) {
        let outcome = yield* run(orgId, { op: "validate", key, value })
        if (outcome._tag === "Reply" && outcome.reply._tag === "Missing") {
          outcome = yield* run(orgId, { op: "validate", key, schema: yield* schema, value })
        }
        if (outcome._tag !== "Reply") return yield* overBudget(outcome, "correction", "checking the correction against the answer schema")
        const reply = outcome.reply
        if (reply._tag === "Checked") return reply.violations
        // A stored schema was checked on the way in; failing now is a bug.
        return yield* Effect.die(new Error(`stored answer schema is unusable: ${reply._tag === "Unusable" ? reply.message : reply._tag}`))
      })

      return AnswerSchemas.of({
        check,
        validate,
        stats: Effect.promise(pool.stats),
        replacedWorkers: pool.replacedWorkers
      })
    })
  )
}
