/**
 * A pool of worker threads for work on tenant input that may cost too much
 * to run on the event loop (checking corrections against answer schemas,
 * scrubbing them): every request has a deadline, and a worker that misses
 * it (or runs out of heap) is terminated and replaced, which is the only
 * way to stop a regular expression or a comparison loop that is running.
 *
 * Fairness: an organization has at most one request in a worker at a time
 * and at most `queuedPerOrg` waiting (more are refused at once); waiting
 * organizations take turns. With at least two workers, one organization's
 * expensive requests never hold up the others'.
 *
 * Written by hand: what it needs (a deadline that terminates a worker
 * mid-computation, one slot per organization, turns between organizations)
 * is what general worker-pool libraries leave out.
 *
 * Workers start on first use. The worker script answers each request
 * `{ id, op, ... }` with one message
 * `{ id, _tag, ... }`, answers `{ op: "stats" }` too, and posts `"ready"`
 * once it can take requests (after any warm-up: no deadline pays for it).
 *
 * Phases: one request may do several things with deadlines of their own
 * (check a correction, scrub it, check it again) in one round trip. The
 * pool then gets a deadline per phase (`phaseTimeoutsMs`) and each worker a
 * cell of shared memory (`workerData.phaseCell`) where it marks, with
 * `enterPhase`, which phase it is in and since when: the deadline is that
 * phase's, counted from its start, and a miss names the phase. Marking
 * costs no message.
 */
import { Data, Effect } from "effect"
import { Worker } from "node:worker_threads"

export interface PoolSettings {
  readonly workers: number
  readonly timeoutMs: number
  readonly heapMb: number
  readonly queuedPerOrg: number
  /** Deadlines per phase (index = phase); without it, one phase with `timeoutMs`. */
  readonly phaseTimeoutsMs?: ReadonlyArray<number> | undefined
}

/** The phase cell: `[phase, ms from the request's start to the phase's start]`. */
export type PhaseCell = Int32Array

/**
 * In a worker: the request that started at `startedAt` (its `startedAt`
 * field) enters `phase` now. The offset is stored first, so a reader that
 * sees the new phase sees its start too.
 */
export const enterPhase = (cell: PhaseCell | undefined, startedAt: number, phase: number) => {
  if (cell === undefined) return
  Atomics.store(cell, 1, Date.now() - startedAt)
  Atomics.store(cell, 0, phase)
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
  readonly worker: Worker
  readonly cell: PhaseCell
  ready: boolean
  job: Job<Request, Reply> | undefined
  readonly side: Map<number, (reply: Reply | undefined) => void>
}

export interface WorkerPool<Request, Reply> {
  /**
   * Queues `request` for `orgId`; `done` gets its outcome. Answers a way to
   * withdraw it while it waits, or `undefined` when the organization's
   * queue is full.
   */
  readonly submit: (
    orgId: string,
    request: Request,
    done: (outcome: Outcome<Reply>) => void,
    phase?: number
  ) => (() => void) | undefined
  /** Sends `request` to every worker outside the queue (after its current job); `undefined` from a worker replaced meanwhile. */
  readonly broadcast: (request: Request) => Promise<ReadonlyArray<Reply | undefined>>
  readonly close: () => void
  /** Workers terminated and replaced so far (over the deadline, out of heap, crashed). */
  readonly replacedWorkers: () => number
}

export const makeWorkerPool = <Request extends object, Reply extends PoolReply>(
  script: URL,
  workerData: unknown,
  settings: PoolSettings
): WorkerPool<Request, Reply> => {
  const slots: Array<Slot<Request, Reply>> = []
  /** Waiting jobs per organization; the map's order is the order of turns. */
  const queues = new Map<string, Array<Job<Request, Reply>>>()
  /** Organizations with a job in a worker now. */
  const running = new Set<string>()
  let nextId = 1
  let closed = false
  let replaced = 0

  const timeouts = settings.phaseTimeoutsMs ?? [settings.timeoutMs]
  const phased = settings.phaseTimeoutsMs !== undefined

  const spawn = (index: number) => {
    const cell: PhaseCell = new Int32Array(new SharedArrayBuffer(8))
    const worker = new Worker(script, {
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
    running.delete(job.orgId)
    job.done(outcome)
    pump()
  }

  const nextJob = (): Job<Request, Reply> | undefined => {
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
      job.startedAt = Date.now()
      Atomics.store(slot.cell, 1, 0)
      Atomics.store(slot.cell, 0, job.phase)
      // The deadline of the phase the worker is in, from that phase's start.
      const check = () => {
        if (slots[index] !== slot || slot.job !== job) return
        const phase = Atomics.load(slot.cell, 0)
        const deadline = job.startedAt + Atomics.load(slot.cell, 1) + (timeouts[phase] ?? settings.timeoutMs)
        const left = deadline - Date.now()
        if (left > 0) {
          job.timer = setTimeout(check, left)
          return
        }
        slot.job = undefined
        replace(index)
        settle(job, { _tag: "Timeout", phase })
      }
      job.timer = setTimeout(check, timeouts[job.phase] ?? settings.timeoutMs)
      slot.worker.postMessage(phased ? { ...job.request, id: job.id, startedAt: job.startedAt } : { ...job.request, id: job.id })
    })
  }

  const submit = (orgId: string, request: Request, done: (outcome: Outcome<Reply>) => void, phase = 0) => {
    const queue = queues.get(orgId) ?? []
    if (queue.length >= settings.queuedPerOrg) return undefined
    const job: Job<Request, Reply> = { id: nextId++, orgId, request, done, phase, startedAt: 0 }
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

  const broadcast = (request: Request) =>
    Promise.all(slots.map((slot) =>
      new Promise<Reply | undefined>((resolve) => {
        const id = nextId++
        slot.side.set(id, resolve)
        slot.worker.postMessage({ ...request, id })
      })
    ))

  const close = () => {
    closed = true
    const pending = [...slots.flatMap((slot) => slot.job === undefined ? [] : [slot.job]), ...[...queues.values()].flat()]
    queues.clear()
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

  // Workers start on first use: a process that never checks anything (the
  // CLI, a process busy with deliveries only) never pays for them.
  let started = false
  const start = () => {
    if (started || closed) return
    started = true
    for (let index = 0; index < settings.workers; index++) spawn(index)
  }

  return {
    submit: (orgId, request, done, phase) => {
      start()
      return submit(orgId, request, done, phase)
    },
    broadcast: (request) => {
      start()
      return broadcast(request)
    },
    close,
    replacedWorkers: () => replaced
  }
}

/** The organization already has `queuedPerOrg` requests waiting. */
export class PoolQueueFull extends Data.TaggedError("PoolQueueFull")<{}> {}

/** `submit` as an Effect: interrupted while waiting, the request is withdrawn (one in a worker runs to its end or deadline). */
export const runInPool = <Request extends object, Reply extends PoolReply>(
  pool: WorkerPool<Request, Reply>,
  orgId: string,
  request: Request,
  phase?: number
): Effect.Effect<Outcome<Reply>, PoolQueueFull> =>
  Effect.callback<Outcome<Reply>, PoolQueueFull>((resume) => {
    const withdraw = pool.submit(orgId, request, (outcome) => resume(Effect.succeed(outcome)), phase)
    if (withdraw === undefined) {
      resume(Effect.fail(new PoolQueueFull()))
      return
    }
    return Effect.sync(withdraw)
  })
