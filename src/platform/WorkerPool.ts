/**
 * A pool of worker threads for work on tenant input that may cost too much
 * to run on the event loop (checking corrections against answer schemas,
 * scrubbing them): every request has a deadline, and a worker that misses
 * it (or runs out of heap) is terminated and replaced, which is the only
 * way to stop a regular expression or a comparison loop that is running.
 *
 * Fairness between organizations (who is admitted, whose waiting request
 * a free worker takes) is `PoolFairness.ts`'s; this file runs the workers.
 *
 * Written by hand: what it needs (a deadline that terminates a worker
 * mid-computation, turns between organizations, admission by share) is
 * what general worker-pool libraries leave out.
 *
 * Workers start as requests need them (a request that finds none free
 * and none starting starts one), or all at once when warmed (`warm`, a
 * server's start) or asked (`broadcast`). The worker script answers each
 * request `{ id, op, ... }` with one message `{ id, _tag, ... }`, answers
 * `{ op: "stats" }` too, and posts `"ready"` once it can take requests
 * (after any warm-up: no deadline pays for it).
 *
 * Phases: one request may do several things with deadlines of their own
 * (check a correction, scrub it, check it again) in one round trip. The
 * pool then gets a deadline per phase (`phaseTimeoutsMs`) and each worker a
 * cell of shared memory (`workerData.phaseCell`) where it marks, with
 * `enterPhase`, which phase it is in and since when: the deadline is that
 * phase's, counted from its start, and a miss names the phase. Marking
 * costs no message.
 */
import { Clock, Effect } from "effect"
import { startWorker } from "./ModuleUrl.ts"
import { makeAdmission, makeTurns } from "./PoolFairness.ts"
import type { PoolWorker } from "./ProcessWorker.ts"
import type { PhaseCell } from "./WorkerPhase.ts"

export interface PoolSettings {
  readonly workers: number
  readonly timeoutMs: number
  readonly heapMb: number
  /** Admitted requests (waiting or in a worker) before organizations over their share are refused. */
  readonly queueCapacity: number
  /** Deadlines per phase (index = phase); without it, one phase with `timeoutMs`. */
  readonly phaseTimeoutsMs?: ReadonlyArray<number> | undefined
  /**
   * The clock jobs are timed by (their cost, their deadlines): the layer's
   * `Clock`, so tests can run it on `TestClock`. Default: Effect's.
   */
  readonly clock?: Clock.Clock | undefined
  /**
   * Starts one worker; default: a thread of `script` with `heapMb` of heap.
   * A child process instead (`ProcessWorker.ts`) has no phase cell shared
   * with the pool: its requests stay in the phase they start in.
   */
  readonly start?: ((script: URL) => PoolWorker) | undefined
}

export interface PoolReply {
  readonly id: number
  readonly _tag: string
}

export type Outcome<Reply> =
  | { readonly _tag: "Reply"; readonly reply: Reply }
  | { readonly _tag: "Timeout"; readonly phase: number }
  | { readonly _tag: "Crashed"; readonly outOfMemory: boolean }

interface Job<Request, Reply> {
  readonly id: number
  readonly orgId: string
  readonly request: Request
  readonly done: (outcome: Outcome<Reply>) => void
  /** The phase it starts in. */
  readonly phase: number
  startedAt: number
  timer?: ReturnType<typeof setTimeout>
}

interface Slot<Request, Reply> {
  readonly worker: PoolWorker
  readonly cell: PhaseCell
  ready: boolean
  job: Job<Request, Reply> | undefined
  readonly side: Map<number, (reply: Reply | undefined) => void>
}

/** What the pool holds now, for tests and metrics. */
export interface PoolLoad {
  readonly admitted: number
  readonly waiting: number
  readonly running: number
  /** Times a worker was left idle while requests waited (for organizations already holding their workers). */
  readonly idleWithWork: number
  /** Workers started (ready or starting). */
  readonly workers: number
}

export interface WorkerPool<Request, Reply> {
  /**
   * Admits one request of `orgId` (which may then `submit` any number of
   * jobs until it calls the answer, once): `undefined` when the pool is
   * full and the organization holds at least its share.
   */
  readonly admit: (orgId: string) => (() => void) | undefined
  /**
   * Queues `request` for `orgId`; `done` gets its outcome. Answers a way to
   * withdraw it while it waits.
   */
  readonly submit: (
    orgId: string,
    request: Request,
    done: (outcome: Outcome<Reply>) => void,
    phase?: number
  ) => () => void
  /** Sends `request` to every worker outside the queue (after its current job); `undefined` from a worker replaced meanwhile. */
  readonly broadcast: (request: Request) => Promise<ReadonlyArray<Reply | undefined>>
  readonly close: () => void
  /**
   * Starts the workers now, if they have not started, and resolves once
   * each has said it is ready: a server calls it while it starts, so that
   * its first request does not wait for them.
   */
  readonly warm: () => Promise<void>
  /** Workers terminated and replaced so far (over the deadline, out of heap, crashed). */
  readonly replacedWorkers: () => number
  readonly load: () => PoolLoad
}

export const makeWorkerPool = <Request extends object, Reply extends PoolReply>(
  script: URL,
  workerData: unknown,
  settings: PoolSettings
): WorkerPool<Request, Reply> => {
  const slots: Array<Slot<Request, Reply>> = []
  const admission = makeAdmission(settings.queueCapacity)
  const turns = makeTurns<Job<Request, Reply>>(settings)
  let idleWithWork = 0
  let nextId = 1
  let closed = false
  let replaced = 0

  const clock = settings.clock ?? Clock.Clock.defaultValue()
  const now = () => clock.currentTimeMillisUnsafe()
  const timeouts = settings.phaseTimeoutsMs ?? [settings.timeoutMs]
  const phased = settings.phaseTimeoutsMs !== undefined

  const spawn = (index: number) => {
    const cell: PhaseCell = new Int32Array(new SharedArrayBuffer(8))
    const worker = settings.start?.(script) ?? startWorker(script, {
      workerData: phased ? { ...(workerData as object), phaseCell: cell } : workerData,
      resourceLimits: { maxOldGenerationSizeMb: settings.heapMb },
      stdout: false,
      stderr: false
    })
    worker.unref()
    const slot: Slot<Request, Reply> = { worker, cell, ready: false, job: undefined, side: new Map() }
    slots[index] = slot
    worker.on("message", (message: Reply | "ready") => {
      if (message === "ready") {
        slot.ready = true
        if (slots.every((each) => each.ready)) { for (const resolve of warming.splice(0)) resolve() }
        pump()
        return
      }
      const waiter = slot.side.get(message.id)
      if (waiter !== undefined) {
        slot.side.delete(message.id)
        waiter(message)
        return
      }
      if (slot.job !== undefined && slot.job.id === message.id) {
        const job = slot.job
        slot.job = undefined
        settle(job, { _tag: "Reply", reply: message })
      }
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
    for (const waiter of old.side.values()) waiter(undefined)
    old.side.clear()
    replaced += 1
    if (!closed) spawn(index)
    void old.worker.terminate()
  }

  const settle = (job: Job<Request, Reply>, outcome: Outcome<Reply>) => {
    if (job.timer !== undefined) clearTimeout(job.timer)
    // A miss counts as the whole deadline: the organization is slow.
    turns.finished(job.orgId, outcome._tag === "Reply" ? now() - job.startedAt : settings.timeoutMs)
    job.done(outcome)
    pump()
  }

  const pump = () => {
    if (closed) return
    // A job waiting with no worker free or starting for it starts one more.
    if (turns.waiting() > 0 && slots.length < settings.workers) {
      let spare = 0
      for (const slot of slots) if (!slot.ready || slot.job === undefined) spare += 1
      for (; turns.waiting() > spare && slots.length < settings.workers; spare += 1) spawn(slots.length)
    }
    slots.forEach((slot, index) => {
      if (!slot.ready || slot.job !== undefined) return
      const job = turns.next()
      if (job === undefined) {
        if (turns.waiting() > 0) idleWithWork += 1
        return
      }
      slot.job = job
      job.startedAt = now()
      Atomics.store(slot.cell, 1, 0)
      Atomics.store(slot.cell, 0, job.phase)
      // The deadline of the phase the worker is in, from that phase's start.
      const check = () => {
        if (slots[index] !== slot || slot.job !== job) return
        const phase = Atomics.load(slot.cell, 0)
        const deadline = job.startedAt + Atomics.load(slot.cell, 1) + (timeouts[phase] ?? settings.timeoutMs)
        const left = deadline - now()
        if (left > 0) {
          job.timer = setTimeout(check, left)
          return
        }
        slot.job = undefined
        replace(index)
        settle(job, { _tag: "Timeout", phase })
      }
      job.timer = setTimeout(check, timeouts[job.phase] ?? settings.timeoutMs)
      slot.worker.postMessage({ ...job.request, id: job.id })
    })
  }

  const submit = (orgId: string, request: Request, done: (outcome: Outcome<Reply>) => void, phase = 0) => {
    const withdraw = turns.enqueue({ id: nextId++, orgId, request, done, phase, startedAt: 0 })
    pump()
    return withdraw
  }

  const broadcast = (request: Request) => {
    start()
    return Promise.all(slots.map((slot) =>
      new Promise<Reply | undefined>((resolve) => {
        const id = nextId++
        slot.side.set(id, resolve)
        slot.worker.postMessage({ ...request, id })
      })
    ))
  }

  const close = () => {
    for (const resolve of warming.splice(0)) resolve()
    closed = true
    const pending = [...slots.flatMap((slot) => slot.job === undefined ? [] : [slot.job]), ...turns.drain()]
    for (const slot of slots) {
      slot.job = undefined
      for (const waiter of slot.side.values()) waiter(undefined)
      void slot.worker.terminate()
    }
    for (const job of pending) {
      if (job.timer !== undefined) clearTimeout(job.timer)
      job.done({ _tag: "Crashed", outOfMemory: false })
    }
  }

  // Workers start when needed: a process that never checks anything (the
  // CLI, a process busy with deliveries only) never pays for them, and one
  // that checks one thing at a time for one (a test's service) for one.
  const warming: Array<() => void> = []
  const start = () => {
    if (closed) return
    for (let index = slots.length; index < settings.workers; index++) spawn(index)
  }

  return {
    admit: admission.admit,
    warm: () =>
      new Promise<void>((resolve) => {
        start()
        if (closed || slots.every((slot) => slot.ready)) resolve()
        else warming.push(resolve)
      }),
    submit,
    broadcast,
    close,
    replacedWorkers: () => replaced,
    load: () => ({
      admitted: admission.total(),
      waiting: turns.waiting(),
      running: turns.running(),
      idleWithWork,
      workers: slots.length
    })
  }
}

/** `submit` as an Effect: interrupted while waiting, the request is withdrawn (one in a worker runs to its end or deadline). */
export const runInPool = <Request extends object, Reply extends PoolReply>(
  pool: WorkerPool<Request, Reply>,
  orgId: string,
  request: Request,
  phase?: number
): Effect.Effect<Outcome<Reply>> =>
  Effect.callback<Outcome<Reply>>((resume) =>
    Effect.sync(pool.submit(orgId, request, (outcome) => resume(Effect.succeed(outcome)), phase))
  )
