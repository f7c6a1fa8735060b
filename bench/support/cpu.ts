/**
 * CPU time of processes, read from /proc (Linux): user + system time of
 * every thread, so svc's embedded database (a worker thread) and its
 * validation workers count as svc's. Resolution is one clock tick (10 ms):
 * figures are per operation over runs of thousands of operations.
 */
import { readdirSync, readFileSync } from "node:fs"
import { setTimeout as sleep } from "node:timers/promises"
import { type Work, workDelta, type WorkSource } from "./work.ts"

const TICK_MICROS = 1_000_000 / 100 // USER_HZ is 100 on Linux

/** User + system CPU time in a `/proc/.../stat` file, in µs (undefined once its process or thread has gone). */
export const statFileMicros = (file: string): number | undefined => {
  try {
    const stat = readFileSync(file, "utf8")
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[11]) + Number(fields[12])) * TICK_MICROS
  } catch {
    return undefined
  }
}

/** CPU time `pid` has used so far, in µs (0 once it has gone). */
export const cpuMicros = (pid: number): number => statFileMicros(`/proc/${pid}/stat`) ?? 0

/** A process (or a group, such as a database server's backends) whose CPU a measurement reports. */
export interface Meter {
  readonly name: string
  /** The pids that make it up now. */
  readonly pids: () => Promise<ReadonlyArray<number>> | ReadonlyArray<number>
  /** Instead of `pids`: CPU time (µs) by thread id of some threads (`threadsMeterOf`). */
  readonly threads?: () => Map<number, number>
  /** The database work it asked for (`work.ts`), read before and after beside its CPU. */
  readonly work?: WorkSource
}

export const meterOf = (name: string, pid: number): Meter => ({ name, pids: () => [pid] })

/**
 * V8's helper threads of `pid` (`V8Worker`, `V8 DefaultWorke…`: concurrent and parallel
 * garbage collection, background compilation): their CPU per operation
 * shows what a process's allocations cost beyond its main thread. Already
 * counted in the process's own figure; reported beside it.
 */
export const v8HelpersOf = (name: string, pid: number): Meter => ({
  name,
  pids: () => [],
  // Per thread, from /proc/<pid>/task/<tid>/stat: /proc/<tid>/stat of a
  // thread reports its whole process (every thread's time).
  threads: () => threadsCpuMicros(pid, (comm) => comm.startsWith("V8"))
})

/**
 * CPU time of the threads of `pid` whose name is `comm` (e.g. Node's
 * `WorkerThread`: svc's embedded database and validation workers), in µs,
 * keyed by thread id: a meter that splits a process by its threads.
 */
export const threadsCpuMicros = (pid: number, comm: string | ((comm: string) => boolean)): Map<number, number> => {
  const named = typeof comm === "string" ? (name: string) => name === comm : comm
  const values = new Map<number, number>()
  let tids: Array<string> = []
  try {
    tids = readdirSync(`/proc/${pid}/task`)
  } catch {
    return values
  }
  for (const tid of tids) {
    try {
      if (!named(readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim())) continue
      const micros = statFileMicros(`/proc/${pid}/task/${tid}/stat`)
      if (micros !== undefined) values.set(Number(tid), micros)
    } catch {
      // The thread ended.
    }
  }
  return values
}

/** The threads named `comm` of `pid`, as a meter of their own. */
export const threadsMeterOf = (name: string, pid: number, comm: string): Meter => ({
  name,
  pids: () => [],
  threads: () => threadsCpuMicros(pid, comm)
})

const snapshot = async (meter: Meter) => {
  if (meter.threads !== undefined) return meter.threads()
  const values = new Map<number, number>()
  for (const pid of await meter.pids()) values.set(pid, cpuMicros(pid))
  return values
}

/**
 * Reads the work of the meters that count it: sources that publish at once
 * next to the CPU's window, the late ones (`settleMs`) after waiting for
 * them, before the window (for the work before it) and after it.
 */
const readWork = async (meters: ReadonlyArray<Meter>, when: "before" | "after") => {
  const sources = meters.filter((meter) => meter.work !== undefined)
  const settle = Math.max(0, ...sources.map((meter) => meter.work!.settleMs ?? 0))
  const read = (late: boolean) =>
    Promise.all(
      sources.filter((meter) => (meter.work!.settleMs ?? 0) > 0 === late)
        .map(async (meter) => [meter.name, await meter.work!.read().catch(() => undefined)] as const)
    )
  const wait = () => settle > 0 ? sleep(settle) : Promise.resolve()
  if (when === "before") {
    await wait()
    const late = await read(true)
    return new Map([...late, ...await read(false)])
  }
  const prompt = await read(false)
  await wait()
  return new Map([...prompt, ...await read(true)])
}

/**
 * Runs `body` and answers its result with the CPU time each meter used
 * meanwhile, in µs, and the database work of the meters that count it
 * (`work`; a source that publishes late is waited for, before and after,
 * outside the CPU's window, and whatever ran during that wait is in its
 * counts). A pid that appears during the run counts whole (it started then);
 * one that ends during the run is lost (a note says so).
 */
export const measureCpu = async <A>(meters: ReadonlyArray<Meter>, body: () => Promise<A>) => {
  const workBefore = await readWork(meters, "before")
  const before = await Promise.all(meters.map(snapshot))
  const result = await body()
  const after = await Promise.all(meters.map(snapshot))
  const workAfter = await readWork(meters, "after")
  const work: Record<string, Work | undefined> = {}
  for (const [name, counts] of workBefore) work[name] = workDelta(counts, workAfter.get(name))
  const cpu: Record<string, number> = {}
  meters.forEach((meter, i) => {
    let used = 0
    for (const [pid, value] of after[i]!) used += value - (before[i]!.get(pid) ?? 0)
    cpu[meter.name] = (cpu[meter.name] ?? 0) + used
  })
  return { result, cpu, work }
}

/** µs of CPU per operation of each process, e.g. `svc 699 · load 41 · postgres 120`. */
export const perOp = (cpu: Record<string, number>, ops: number): Record<string, number> =>
  Object.fromEntries(Object.entries(cpu).map(([name, micros]) => [name, Math.round(micros / Math.max(1, ops))]))

export const formatPerOp = (perOperation: Record<string, number>) =>
  Object.entries(perOperation).map(([name, micros]) => `${name} ${micros}`).join(" · ")
