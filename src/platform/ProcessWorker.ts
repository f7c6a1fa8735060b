/**
 * A pool worker (`WorkerPool.ts`) that is a child process rather than a
 * thread, for work whose memory must be bounded whatever it does: a
 * thread's heap limit (`resourceLimits`) is enforced by Node only between
 * steps of JavaScript, and one native step that allocates past it (a
 * `split` of millions of characters, a `map` over millions of items) ends
 * the whole process; terminating a thread waits for the step to end. A
 * child process has its own heap (`--max-old-space-size`); running out of
 * it, or being killed at its deadline (`SIGKILL`, which no native step
 * delays), ends the child only, and the pool starts another.
 *
 * It answers to the pool as a `Worker` does: `postMessage`, the `message`,
 * `error` and `exit` events, `terminate`, `unref`. Messages are JSON. What a
 * thread would share through memory instead: a request's `progress`
 * (`Int32Array`) stays in this process, and the child's
 * `{ id, progress: n }` messages write `n` into it (`reportProgress`,
 * `ProcessChild.ts`).
 *
 * The child starts through `compile-cached.ts` (as a worker thread does)
 * with `script`'s URL as its last argument, and ends when its parent's
 * channel closes (`exitWithParent`, `ProcessChild.ts`). Nothing of it is shared with another
 * svc process: each process has its own children.
 *
 * svc does not start the children itself: its forker does
 * (`process-forker.ts`), a small process started with the first child and
 * relaying the children's messages, so that replacing a child costs svc's
 * event loop no `fork()` of svc (23-75 ms at 575 MB resident). A child's
 * parent is the forker: it ends when the forker does, and the forker when
 * svc does. A forker that ended takes its children with it (each reports
 * its exit, and the pool replaces it through a new forker).
 */
import { type ChildProcess, fork } from "node:child_process"
import { EventEmitter } from "node:events"
import { fileURLToPath } from "node:url"
import { siblingModule } from "./ModuleUrl.ts"
import type { ForkerCommand, ForkerReport } from "./process-forker.ts"

/** What the pool needs of a worker: a thread (`Worker`) or a child process (`startProcessWorker`). */
export interface PoolWorker {
  readonly on: (event: "message" | "error" | "exit", listener: (...args: Array<any>) => void) => unknown
  readonly postMessage: (message: unknown) => void
  readonly terminate: () => unknown
  readonly unref: () => unknown
}

/** The signal V8 ends a process with when its heap is full (`abort()`). */
const OUT_OF_MEMORY_SIGNAL = "SIGABRT"

/** What the forker reports of one child, to its `PoolWorker`. */
type Listener = (report: ForkerReport) => void

interface Forker {
  readonly process: ChildProcess
  readonly children: Map<number, Listener>
}

let forker: Forker | undefined
let nextChild = 1
/**
 * The children's process ids, killed when this process exits, whatever the
 * way (a child busy with a long step would not see its channel close). Only
 * a `SIGKILL` of this process leaves one running, until its step ends (the
 * forker, whose channel closes, kills the others).
 */
const alive = new Set<number>()
let killOnExit = false
const killAll = () => {
  for (const pid of alive) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // Ended meanwhile.
    }
  }
  forker?.process.kill("SIGKILL")
}

/** The forker, started with the first child (and again after one ended). */
const theForker = (): Forker => {
  if (forker !== undefined) return forker
  const started: Forker = {
    process: fork(fileURLToPath(siblingModule("./process-forker.ts", import.meta.url)), [], {
      serialization: "json",
      stdio: ["ignore", "ignore", "ignore", "ipc"]
    }),
    children: new Map()
  }
  forker = started
  // It lives as long as its children need it: it keeps nothing of this process alive.
  started.process.unref()
  started.process.channel?.unref()
  started.process.on("message", (report: ForkerReport) => started.children.get(report.from)?.(report))
  const ended = () => {
    if (forker === started) forker = undefined
    // Its children end with it: each reports its exit.
    for (const [id, listener] of started.children) listener({ from: id, exit: 1, signal: null })
    started.children.clear()
  }
  started.process.on("exit", ended)
  started.process.on("error", ended)
  if (!killOnExit) {
    killOnExit = true
    process.on("exit", killAll)
  }
  return started
}

export const startProcessWorker = (script: URL, options: { readonly heapMb: number }): PoolWorker => {
  const events = new EventEmitter()
  const progress = new Map<number, Int32Array>()
  const id = nextChild++
  const { process: channel, children } = theForker()
  let killed = false
  let pid: number | undefined
  let exited = false
  const send = (command: ForkerCommand) => {
    if (channel.connected) channel.send(command, () => undefined)
  }
  children.set(id, (report) => {
    if ("pid" in report) {
      pid = report.pid
      alive.add(pid)
    } else if ("message" in report) {
      const message = report.message as any
      if (typeof message === "object" && message !== null && typeof message.progress === "number") {
        const cell = progress.get(message.id)
        if (cell !== undefined) cell[0] = message.progress
        return
      }
      if (typeof message === "object" && message !== null) progress.delete(message.id)
      events.emit("message", message)
    } else if ("error" in report) {
      events.emit("error", new Error(report.error))
    } else if (!exited) {
      exited = true
      children.delete(id)
      if (pid !== undefined) alive.delete(pid)
      progress.clear()
      if (!killed && report.signal === OUT_OF_MEMORY_SIGNAL) {
        events.emit(
          "error",
          Object.assign(new Error("the process's heap is full"), { code: "ERR_WORKER_OUT_OF_MEMORY" })
        )
      }
      events.emit("exit", report.exit ?? 1)
    }
  })
  send({
    start: id,
    module: fileURLToPath(siblingModule("./compile-cached.ts", import.meta.url)),
    args: [script.href],
    execArgv: [`--max-old-space-size=${options.heapMb}`]
  })
  return {
    on: (event, listener) => events.on(event, listener),
    postMessage: (message) => {
      if (exited) return
      const { progress: cell, ...rest } = message as { id?: number; progress?: unknown }
      if (cell instanceof Int32Array && typeof rest.id === "number") progress.set(rest.id, cell)
      // A child that ended meanwhile: its `exit` settles the request.
      send({ to: id, message: rest })
    },
    terminate: () => {
      if (killed || exited) return
      killed = true
      send({ kill: id })
    },
    // The forker's channel is unreferenced already: a child keeps nothing of this process alive.
    unref: () => undefined
  }
}
