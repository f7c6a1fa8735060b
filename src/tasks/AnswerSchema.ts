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
 * - admission is fair (`WorkerPool.ts`): the pool holds
 *   `SVC_ANSWER_VALIDATION_QUEUE` checks before it refuses anyone, and then
 *   only organizations holding at least their share (429 with
 *   `Retry-After`); waiting organizations take turns, and one whose checks
 *   are slow holds at most all workers but one (there are at least two),
 *   so its expensive checks never hold up the others';
 * - compiled validators live only in each worker's cache, bounded by count
 *   (`SVC_ANSWER_VALIDATION_CACHE`, least recently used dropped) and
 *   compiled again on demand: the worker asks for the schema when it does
 *   not hold the task's validator, so this process keeps no schemas either.
 */
import { Clock, Context, Data, Effect, Layer } from "effect"
import { SvcConfig } from "../platform/Config.ts"
import { siblingModule } from "../platform/ModuleUrl.ts"
import { admitted } from "../platform/PoolFairness.ts"
import { makeWorkerPool, type Outcome, type PoolSettings, runInPool } from "../platform/WorkerPool.ts"
import { appendPath, type SchemaViolation } from "./SchemaCompiler.ts"
import type { WorkerReply, WorkerRequest } from "./validation-worker.ts"

export { type SchemaViolation } from "./SchemaCompiler.ts"

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

/** The validation queue is full and this organization holds at least its share of it. */
export class ValidationQueueFull extends Data.TaggedError("ValidationQueueFull")<{
  readonly limit: string
  readonly value: number
}> {}

const scalarBytes = (value: unknown) =>
  typeof value === "string"
    ? value.length + 2
    : typeof value === "number"
    ? String(value).length
    : typeof value === "boolean"
    ? 5
    : 4

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
  const stack: Array<{ readonly value: unknown; readonly depth: number; readonly path: string }> = [{
    value: schema,
    depth: 1,
    path: root
  }]
  const over = (limit: string, value: number, field: string, message: string) =>
    new OverLimit({ limit, value, field, message })
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
        for (let i = value.length - 1; i >= 0; i--) {
          stack.push({ value: value[i], depth: depth + 1, path: `${path}[${i}]` })
        }
      } else {
        objects += 1
        if (objects > limits.maxSubschemas) {
          return over(
            "SVC_ANSWER_SCHEMA_MAX_SUBSCHEMAS",
            limits.maxSubschemas,
            path,
            `has more than ${limits.maxSubschemas} subschemas (objects)`
          )
        }
        bytes += 2
        const entries = Object.entries(value)
        for (let i = entries.length - 1; i >= 0; i--) {
          const [key, child] = entries[i]!
          bytes += key.length + 4
          if (bytes > limits.maxBytes) break
          const childPath = appendPath(path, key)
          if (key === "pattern" && typeof child === "string" && child.length > limits.maxPatternLength) {
            return over(
              "SVC_ANSWER_SCHEMA_MAX_PATTERN_LENGTH",
              limits.maxPatternLength,
              childPath,
              `is a pattern longer than ${limits.maxPatternLength} characters`
            )
          }
          if (key === "patternProperties" && typeof child === "object" && child !== null && !Array.isArray(child)) {
            const long = Object.keys(child).find((pattern) => pattern.length > limits.maxPatternLength)
            if (long !== undefined) {
              return over(
                "SVC_ANSWER_SCHEMA_MAX_PATTERN_LENGTH",
                limits.maxPatternLength,
                childPath,
                `holds a pattern longer than ${limits.maxPatternLength} characters`
              )
            }
          }
          stack.push({ value: child, depth: depth + 1, path: childPath })
        }
      }
    }
    if (bytes > limits.maxBytes) {
      return over(
        "SVC_ANSWER_SCHEMA_MAX_BYTES",
        limits.maxBytes,
        root,
        `is larger than ${limits.maxBytes} bytes as JSON`
      )
    }
  }
  return undefined
}

// ---------------------------------------------------------------------------
// The validation workers

type Request = WorkerRequest extends infer R ? R extends { readonly id: number } ? Omit<R, "id"> : never : never

const WORKER_URL = siblingModule("./validation-worker.ts", import.meta.url)

/** The validation workers, each keeping at most `cacheEntries` compiled validators. */
export const makeValidationPool = (settings: PoolSettings & { readonly cacheEntries: number }) => {
  const pool = makeWorkerPool<Request, WorkerReply>(WORKER_URL, { cacheEntries: settings.cacheEntries }, settings)
  /** What each worker holds: compiled validators kept, schemas in Ajv's registries. */
  const stats = () =>
    pool.broadcast({ op: "stats" }).then((replies) =>
      replies.map((reply) =>
        reply?._tag === "Stats" ? { cached: reply.cached, registered: reply.registered } : { cached: 0, registered: 0 }
      )
    )
  return { ...pool, stats }
}

// ---------------------------------------------------------------------------
// The service

export class AnswerSchemas extends Context.Service<AnswerSchemas, {
  /**
   * Checks a new task's schema: limits first, then compiles it (kept under
   * `key`, the new task's id). `SchemaUnusable` when it is not usable JSON
   * Schema, `OverLimit` naming the limit it exceeds.
   */
  readonly check: (
    orgId: string,
    key: string,
    schema: unknown,
    /** The request's member holding the schema, naming it in `OverLimit` (default `answer_schema`). */
    field?: string
  ) => Effect.Effect<void, SchemaUnusable | OverLimit | ValidationQueueFull>
  /**
   * Validates `value` against the schema of task `key`; `schema` is read
   * only when the worker does not hold the task's validator. `OverLimit`
   * when the check goes over its time or memory budget.
   */
  readonly validate: (
    orgId: string,
    key: string,
    schema: Effect.Effect<unknown>,
    value: unknown,
    /** The request's member holding `value`, naming it in `OverLimit` (default `correction`). */
    field?: string
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
      const clock = yield* Clock.Clock
      const pool = yield* Effect.acquireRelease(
        Effect.sync(() =>
          makeValidationPool({
            clock,
            workers: config.answerValidationWorkers,
            timeoutMs: config.answerValidationTimeoutMs,
            heapMb: config.answerValidationHeapMb,
            cacheEntries: config.answerValidationCacheEntries,
            queueCapacity: config.answerValidationQueue
          })
        ),
        (pool) => Effect.sync(pool.close)
      )
      // Started with the server, before it listens: the first task then
      // does not wait for the workers to load.
      if (config.warmStart) yield* Effect.promise(pool.warm)

      const overBudget = (outcome: Outcome<WorkerReply>, field: string, what: string): OverLimit =>
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

      const run = (orgId: string, request: Request) => runInPool(pool, orgId, request)
      /** Runs `effect` (the pool requests of one check) holding one admission. */
      const admit = <A, E, R>(orgId: string, effect: Effect.Effect<A, E, R>) =>
        admitted(pool, orgId, effect).pipe(
          Effect.catchTag("PoolQueueFull", () =>
            Effect.fail(
              new ValidationQueueFull({ limit: "SVC_ANSWER_VALIDATION_QUEUE", value: config.answerValidationQueue })
            ))
        )

      const check = Effect.fn("AnswerSchemas.check")(
        function*(orgId: string, key: string, schema: unknown, field = "answer_schema") {
          const exceeded = measureSchema(schema, limits, field)
          if (exceeded !== undefined) return yield* exceeded
          const outcome = yield* admit(orgId, run(orgId, { op: "check", key, schema }))
          if (outcome._tag !== "Reply") return yield* overBudget(outcome, field, "compiling the schema")
          if (outcome.reply._tag === "Unusable") return yield* new SchemaUnusable({ message: outcome.reply.message })
        }
      )

      // Untraced (no span, no stack capture): it runs on every correction.
      const validate = Effect.fnUntraced(function*(
        orgId: string,
        key: string,
        schema: Effect.Effect<unknown>,
        value: unknown,
        field = "correction"
      ) {
        const outcome = yield* admit(
          orgId,
          Effect.flatMap(
            run(orgId, { op: "validate", key, value }),
            (first) =>
              first._tag === "Reply" && first.reply._tag === "Missing"
                ? Effect.flatMap(schema, (schema) => run(orgId, { op: "validate", key, schema, value }))
                : Effect.succeed(first)
          )
        )
        if (outcome._tag !== "Reply") {
          return yield* overBudget(
            outcome,
            field,
            field === "correction"
              ? "checking the correction against the answer schema"
              : `checking ${field} against its schema`
          )
        }
        const reply = outcome.reply
        if (reply._tag === "Checked") return reply.violations
        // A stored schema was checked on the way in; failing now is a bug.
        return yield* Effect.die(
          new Error(`stored answer schema is unusable: ${reply._tag === "Unusable" ? reply.message : reply._tag}`)
        )
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
