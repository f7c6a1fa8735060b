/**
 * `npx node bench/inprocess/feedback-work.ts`: what the feedback POST's own
 * work costs, measured alone: checking the correction against its task's
 * answer schema (Ajv, `src/tasks/SchemaCompiler.ts`) and the secret scan
 * (`src/feedback/Scrubber.ts`), for the `writes` scenario's correction and
 * answer schema. The Effect floor does neither, so svc's CPU per feedback
 * POST is held to the floor's plus this (`bench/scenarios/writes.ts`).
 *
 * Two figures, µs of CPU per correction:
 *
 * - `alone`: parse, check and scrub in a loop on this thread (the work
 *   itself, on warm caches);
 * - `in a worker`: the same requests through svc's correction worker
 *   (`src/feedback/correction-worker.ts`, the message svc sends), one at a
 *   time, so the worker sleeps between requests and each one wakes it, as
 *   in svc under the `writes` load (some 1 500 POSTs a second, one every
 *   ~650 µs, against ~20 µs of work: the worker is asleep when the next one
 *   comes); the figure is this thread's side of the round trip
 *   (`postMessage`, the reply) plus the worker's CPU: what the work costs
 *   svc's process as svc runs it. `16 in flight` keeps the worker awake
 *   and shows what the round trip costs without the wake-ups.
 *
 * `BENCH_WORK_REQUESTS` corrections per block (default 4 000), `BENCH_ROUNDS`
 * blocks (default 3); the median is reported.
 */
import { readdirSync, readFileSync } from "node:fs"
import { Worker } from "node:worker_threads"
import type { CorrectionReply, CorrectionRequest } from "../../src/feedback/CorrectionWork.ts"
import { type Json, scrub } from "../../src/feedback/Scrubber.ts"
import { makeSchemaCompiler } from "../../src/tasks/SchemaCompiler.ts"
import { answerSchema, correction } from "../scenarios/writes.ts"

// Made on first use: `writes.ts` imports this module, and its `correction` is not defined yet while this one loads.
let textsMade: ReadonlyArray<string> | undefined
const texts = () => (textsMade ??= Array.from({ length: 64 }, (_, i) => JSON.stringify(correction(i))))
/** An organization with a few keys and secrets, as the scan is given them. */
const known = {
  keyHashes: Array.from({ length: 4 }, (_, i) => `${i}`.repeat(64)),
  values: ["sk_live_0123456789abcdef", "postgres://app:hunter2-hunter2@db.internal/app"]
}

/**
 * CPU µs so far of this process's threads named `WorkerThread` (Node's
 * worker threads), from `schedstat` (nanoseconds; `stat` counts 10 ms ticks).
 */
const workerThreads = () => {
  let micros = 0
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      if (readFileSync(`/proc/self/task/${tid}/comm`, "utf8").trim() === "WorkerThread") {
        micros += Number(readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]) / 1000
      }
    } catch {
      // The thread ended meanwhile.
    }
  }
  return micros
}

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

/** The work in a loop on this thread: µs of this thread's CPU per correction. */
const alone = async (requests: number) => {
  const compiler = makeSchemaCompiler(10)
  const credentials = { keyHashes: new Set(known.keyHashes), values: known.values }
  const before = process.threadCpuUsage()
  for (let i = 0; i < requests; i++) {
    const document = JSON.parse(texts()[i % 64]!) as Json
    const checked = compiler.validate("task", answerSchema, document)
    if (checked._tag !== "Checked" || checked.violations.length > 0) throw new Error("the correction does not fit")
    await scrub(document, credentials, "correction")
  }
  const used = process.threadCpuUsage(before)
  return (used.user + used.system) / requests
}

/** The same work through a correction worker, `inFlight` at once: this thread's and the worker's CPU per correction. */
const startWorker = async () => {
  const worker = new Worker(new URL("../../src/feedback/correction-worker.ts", import.meta.url), {
    workerData: { cacheEntries: 10 }
  })
  await new Promise<void>((resolve, reject) => {
    worker.once("error", reject)
    worker.once("message", () => resolve())
  })
  let nextId = 0
  const waiting = new Map<number, (reply: CorrectionReply) => void>()
  worker.on("message", (reply: CorrectionReply) => {
    const resolve = waiting.get(reply.id)!
    waiting.delete(reply.id)
    resolve(reply)
  })
  const ask = (request: CorrectionRequest) =>
    new Promise<CorrectionReply>((resolve) => {
      waiting.set(request.id, resolve)
      worker.postMessage(request)
    })
  const correct = (i: number, first: boolean) =>
    ask({
      id: nextId++,
      op: "correct",
      key: "task",
      text: texts()[i % 64]!,
      ...(first ? { schema: answerSchema } : {}),
      known: first ? { org: "org", fingerprint: "1", known } : { org: "org", fingerprint: "1" },
      root: "correction"
    })
  const first = await correct(0, true)
  if (first._tag !== "Corrected") throw new Error(`the worker answered ${first._tag}`)
  const block = async (requests: number, inFlight: number) => {
    const main0 = process.threadCpuUsage()
    const worker0 = workerThreads()
    let next = 0
    await Promise.all(Array.from({ length: inFlight }, async () => {
      while (next < requests) {
        const reply = await correct(next++, false)
        if (reply._tag !== "Corrected") throw new Error(`the worker answered ${reply._tag}`)
      }
    }))
    const main = process.threadCpuUsage(main0)
    return { main: (main.user + main.system) / requests, worker: (workerThreads() - worker0) / requests }
  }
  return { block, stop: () => worker.terminate() }
}

export interface FeedbackWork {
  /** µs per correction: parse, check and scrub in a loop. */
  readonly alone: number
  /** µs per correction through a worker, one at a time: the sending thread's side and the worker's. */
  readonly inWorker: { readonly main: number; readonly worker: number }
  /** The same, 16 in flight (the worker kept awake). */
  readonly inWorkerBusy: { readonly main: number; readonly worker: number }
}

/** Median over `rounds` blocks of each, alternating. */
export const measureFeedbackWork = async (requests = 4_000, rounds = 3): Promise<FeedbackWork> => {
  const worker = await startWorker()
  try {
    await alone(requests)
    await worker.block(requests, 16)
    const loops: Array<number> = []
    const trips: Array<{ main: number; worker: number }> = []
    const busy: Array<{ main: number; worker: number }> = []
    for (let round = 0; round < rounds; round++) {
      loops.push(await alone(requests))
      trips.push(await worker.block(requests, 1))
      busy.push(await worker.block(requests, 16))
    }
    const medianOf = (blocks: ReadonlyArray<{ main: number; worker: number }>) => ({
      main: median(blocks.map((t) => t.main)),
      worker: median(blocks.map((t) => t.worker))
    })
    return { alone: median(loops), inWorker: medianOf(trips), inWorkerBusy: medianOf(busy) }
  } finally {
    await worker.stop()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const work = await measureFeedbackWork(
    Number(process.env.BENCH_WORK_REQUESTS ?? 4_000),
    Number(process.env.BENCH_ROUNDS ?? 3)
  )
  console.log(
    `feedback's own work per correction: alone ${work.alone.toFixed(1)} µs; in a worker ${
      (work.inWorker.main + work.inWorker.worker).toFixed(1)
    } µs one at a time (sending thread ${work.inWorker.main.toFixed(1)}, worker ${work.inWorker.worker.toFixed(1)}), ${
      (work.inWorkerBusy.main + work.inWorkerBusy.worker).toFixed(1)
    } µs 16 in flight (${work.inWorkerBusy.main.toFixed(1)}, ${work.inWorkerBusy.worker.toFixed(1)})`
  )
}
