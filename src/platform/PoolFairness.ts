/**
 * Fairness between organizations in the worker pool (`WorkerPool.ts`):
 * who is admitted, and whose waiting request a free worker takes next.
 *
 * Fair admission (`makeAdmission`): the pool holds at most `queueCapacity`
 * admitted requests (waiting or in a worker) before it refuses anyone; once
 * it is full, an organization is refused only while it holds at least its
 * share (the capacity divided by the organizations holding admissions). A
 * lone organization can use the whole queue; a crowd of them each keep
 * their share, so the queue holds at most about twice its capacity. The
 * decision is two map reads: callers take the admission before reading the
 * request's body, so a refusal costs next to nothing.
 *
 * Fair service (`makeTurns`): free workers serve the waiting organizations
 * in turns (round-robin), whatever the length of each one's backlog, so no
 * organization waits behind another's. An organization whose recent
 * requests were cheap may take every worker (a lone tenant uses the whole
 * pool); one whose requests are slow (a tenth of the deadline or more on
 * average, or a miss) or not yet known holds at most all workers but one,
 * so with at least two workers one organization's expensive requests never
 * hold up the others' for longer than a cheap request takes.
 */
import { Data, Effect } from "effect"

/** Admissions held per organization; `admit` answers its release, or `undefined` when refused. */
export const makeAdmission = (queueCapacity: number) => {
  const admitted = new Map<string, number>()
  let total = 0
  const admit = (orgId: string): (() => void) | undefined => {
    const held = admitted.get(orgId) ?? 0
    if (total >= queueCapacity) {
      const holders = admitted.size + (held === 0 ? 1 : 0)
      if (held >= Math.max(1, Math.floor(queueCapacity / holders))) return undefined
    }
    admitted.set(orgId, held + 1)
    total += 1
    let released = false
    return () => {
      if (released) return
      released = true
      total -= 1
      const left = (admitted.get(orgId) ?? 1) - 1
      if (left === 0) admitted.delete(orgId)
      else admitted.set(orgId, left)
    }
  }
  return { admit, total: () => total }
}

/** What an organization's recent requests cost, to decide whether it may take the last free worker. */
interface OrgCost {
  /** Requests of the organization in a worker now. */
  running: number
  /** Moving average of its requests' time in a worker (ms); `undefined` before the first one ends. */
  averageMs: number | undefined
  /** When it was last served (the turn counter): the longest unserved goes first. */
  lastTurn: number
}

/** Share of the deadline under which an organization's requests count as cheap. */
const CHEAP_SHARE_OF_DEADLINE = 0.1
/** Organizations whose costs are remembered (least recently used forgotten: they count as unknown again). */
const COSTS_KEPT = 10_000

/**
 * The waiting jobs per organization and the turns between them, for a pool
 * of `workers` whose deadline is `timeoutMs`.
 */
export const makeTurns = <Job extends { readonly orgId: string }>(settings: {
  readonly workers: number
  readonly timeoutMs: number
}) => {
  const queues = new Map<string, Array<Job>>()
  const costs = new Map<string, OrgCost>()
  const cheapMs = settings.timeoutMs * CHEAP_SHARE_OF_DEADLINE
  let waiting = 0
  let running = 0
  let turn = 0

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

  /** Queues `job` behind its organization's; answers a way to withdraw it while it waits. */
  const enqueue = (job: Job) => {
    const queue = queues.get(job.orgId) ?? []
    queue.push(job)
    waiting += 1
    if (!queues.has(job.orgId)) queues.set(job.orgId, queue)
    return () => {
      const held = queues.get(job.orgId)
      const at = held?.indexOf(job) ?? -1
      if (at < 0) return
      held!.splice(at, 1)
      waiting -= 1
      if (held!.length === 0) queues.delete(job.orgId)
    }
  }

  /** The next job a free worker takes, counted as running; `undefined` when every waiting organization holds its workers. */
  const next = (): Job | undefined => {
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
    waiting -= 1
    chosen.running += 1
    running += 1
    return job
  }

  /** A running job of `orgId` ended after `ms` in a worker (a miss counts as the whole deadline). */
  const finished = (orgId: string, ms: number) => {
    const cost = costOf(orgId)
    cost.running -= 1
    running -= 1
    cost.averageMs = cost.averageMs === undefined ? ms : cost.averageMs * 0.75 + ms * 0.25
  }

  /** Every waiting job, taken out of the queues (the pool is closing). */
  const drain = (): Array<Job> => {
    const all = [...queues.values()].flat()
    queues.clear()
    waiting = 0
    return all
  }

  return { enqueue, next, finished, drain, waiting: () => waiting, running: () => running }
}

/** The pool is full and the organization holds at least its share of it. */
export class PoolQueueFull extends Data.TaggedError("PoolQueueFull")<{}> {}

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
