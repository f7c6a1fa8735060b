/**
 * A pool of worker threads for work on tenant input that may cost too much
 * to run on the event loop (checking corrections against answer schemas,
 * scrubbing them): every request has a deadline, and a worker that misses
 * it (or runs out of heap) is terminated and replaced, which is the only
 * way to stop a regular expression or a comparison loop that is running.
 *
 * Fair admission (`admit`): the pool holds at most `queueCapacity` admitted
 * requests (waiting or in a worker) before it refuses anyone; once it is
 * full, an organization is refused only while it holds at least its share
 * (the capacity divided by the organizations holding admissions). A lone
 * organization can use the whole queue; a crowd of them each keep their
 * share, so the queue holds at most about twice its capacity. The decision
 * is two map reads: callers take the admission before reading the request's
 * body, so a refusal costs next to nothing.
 *
 * Fair service: free workers serve the waiting organizations in turns
 * (round-robin), whatever the length of each one's backlog, so no
 * organization waits behind another's. An organization whose recent
 * requests were cheap may take every worker (a lone tenant uses the whole
 * pool); one whose requests are slow (a tenth of the deadline or more on
 * average, or a miss) or not yet known holds at most all workers but one,
 * so with at least two workers one organization's expensive requests never
 * hold up the others' for longer than a cheap request takes.
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
import { Clock, Data, Effect } from "effect"
import { startWorker } from "./ModuleUrl.ts"
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

/** What an organization's recent requests cost, to decide whether it may take the last free worker. */
interface OrgCost {
  /** Requests of the organization in a worker now. */
  running: number
  /** Moving average of its requests' time in a worker (ms); `undefined` before the first one ends. */
  averageMs: number | undefined
  /** When it was last served (the pool's turn counter): the longest unserved goes first. */
  lastTurn: number
}

/** Share of the deadline under which an organization's requests count as cheap. */
const CHEAP_SHARE_OF_DEADLINE = 0.1
/** Organizations whose costs are remembered (least recently used forgotten: they count as unknown again). */
const COSTS_KEPT = 10_000

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
  /** Waiting jobs per organization. */
  const queues = new Map<string, Array<Job<Request, Reply>>>()
  const costs = new Map<string, OrgCost>()
  /** Admissions held per organization, and in all. */
  const admitted = new Map<string, number>()
  let admittedTotal = 0
  let waitingTotal = 0
  let runningTotal = 0
  let idleWithWork = 0
  let nextId = 1
  let closed = false
  let replaced = 0

  const clock = settings.clock ?? Clock.Clock.defaultValue()
  const now = () => clock.currentTimeMillisUnsafe()
  const timeouts = settings.phaseTimeoutsMs ?? [settings.timeoutMs]
  const phased = settings.phaseTimeoutsMs !== undefined
  const cheapMs = settings.timeoutMs * CHEAP_SHARE_OF_DEADLINE

  const costOf = (orgId: string): OrgCost => {
    let cost = costs.get(orgId)
    if (cost === undefined) {
      if (costs.size >= COSTS_KEPT) {
        for (const [key, value] of costs) {
          if (value.running === 0) {
            costs.delete(key)
            break
          }
        }
      }
      cost = { running: 0, averageMs: undefined, lastTurn: 0 }
      costs.set(orgId, cost)
    }
    return cost
  }

  /** Workers the organization may hold at once: all when its requests are known to be cheap, else all but one. */
  const workersFor = (cost: OrgCost) =>
    cost.averageMs !== undefined && cost.averageMs < cheapMs ? settings.workers : Math.max(1, settings.workers - 1)

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
        if (slots.every((each) => each.ready)) for (const resolve of warming.splice(0)) resolve()
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
    const cost = costOf(job.orgId)
    cost.running -= 1
    runningTotal -= 1
    // A miss counts as the whole deadline: the organization is slow.
    const ms = outcome._tag === "Reply" ? now() - job.startedAt : settings.timeoutMs
    cost.averageMs = cost.averageMs === undefined ? ms : cost.averageMs * 0.75 + ms * 0.25
    job.done(outcome)
    pump()
  }

  let turn = 0
  const nextJob = (): Job<Request, Reply> | undefined => {
    // Turns: of the organizations waiting that may take a worker, the one
    // served longest ago (a newcomer: never) goes first, however long the
    // others' backlogs.
    let chosen: OrgCost | undefined
    let chosenOrg: string | undefined
    for (const orgId of queues.keys()) {
      const cost = costOf(orgId)
      if (cost.running >= workersFor(cost)) continue
      if (chosen === undefined || cost.lastTurn < chosen.lastTurn) {
        chosen = cost
        chosenOrg = orgId
      }
    }
    if (chosen === undefined) return undefined
    const queue = queues.get(chosenOrg!)!
    const job = queue.shift()!
    if (queue.length === 0) queues.delete(chosenOrg!)
    chosen.lastTurn = ++turn
    waitingTotal -= 1
    chosen.running += 1
    runningTotal += 1
    return job
  }

  const pump = () => {
    if (closed) return
    // A job waiting with no worker free or starting for it starts one more.
    if (waitingTotal > 0 && slots.length < settings.workers) {
      let spare = 0
      for (const slot of slots) if (!slot.ready || slot.job === undefined) spare += 1
      for (; waitingTotal > spare && slots.length < settings.workers; spare += 1) spawn(slots.length)
    }
    slots.forEach((slot, index) => {
      if (!slot.ready || slot.job !== undefined) return
      const job = nextJob()
      if (job === undefined) {
        if (waitingTotal > 0) idleWithWork += 1
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

  const admit = (orgId: string) => {
    const held = admitted.get(orgId) ?? 0
    if (admittedTotal >= settings.queueCapacity) {
      const holders = admitted.size + (held === 0 ? 1 : 0)
      if (held >= Math.max(1, Math.floor(settings.queueCapacity / holders))) return undefined
    }
    admitted.set(orgId, held + 1)
    admittedTotal += 1
    let released = false
    return () => {
      if (released) return
      released = true
      admittedTotal -= 1
      const left = (admitted.get(orgId) ?? 1) - 1
      if (left === 0) admitted.delete(orgId)
      else admitted.set(orgId, left)
    }
  }

  const submit = (orgId: string, request: Request, done: (outcome: Outcome<Reply>) => void, phase = 0) => {
    const queue = queues.get(orgId) ?? []
    const job: Job<Request, Reply> = { id: nextId++, orgId, request, done, phase, startedAt: 0 }
    queue.push(job)
    waitingTotal += 1
    if (!queues.has(orgId)) queues.set(orgId, queue)
    pump()
    return () => {
      const waiting = queues.get(orgId)
      const at = waiting?.indexOf(job) ?? -1
      if (at < 0) return
      waiting!.splice(at, 1)
      waitingTotal -= 1
      if (waiting!.length === 0) queues.delete(orgId)
    }
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
    const pending = [...slots.flatMap((slot) => slot.job === undefined ? [] : [slot.job]), ...[...queues.values()].flat()]
    queues.clear()
    waitingTotal = 0
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
    admit,
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
    load: () => ({ admitted: admittedTotal, waiting: waitingTotal, running: runningTotal, idleWithWork, workers: slots.length })
  }
}

/** The pool is full and the organization holds at least its share of it. */
export class PoolQueueFull extends Data.TaggedError("PoolQueueFull")<{}> {}

/** `submit` as an Effect: interrupted while waiting, the request is withdrawn (one in a worker runs to its end or deadline). */
export const runInPool = <Request extends object, Reply extends PoolReply>(
  pool: WorkerPool<Request, Reply>,
  orgId: string,
  request: Request,
  phase?: number
): Effect.Effect<Outcome<Reply>> =>
  Effect.callback<Outcome<Reply>>((resume) =>
    Effect.sync(pool.submit(orgId, request, (outcome) => resume(Effect.succeed(outcome)), phase)))

/** Runs `effect` holding one admission of `orgId`; `PoolQueueFull` at once when the pool refuses it. */
export const admitted = <A, E, R>(
  pool: { readonly admit: (orgId: string) => (() => void) | undefined },
  orgId: string,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E | PoolQueueFull, R> =>
  Effect.suspend((): Effect.Effect<A, E | PoolQueueFull, R> => {
    const release = pool.admit(orgId)
    if (release === undefined) return Effect.fail(new PoolQueueFull())
    return Effect.ensuring(effect, Effect.sync(release))
  })
