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
 */
import { type ChildProcess, fork } from "node:child_process"
import { EventEmitter } from "node:events"
import { fileURLToPath } from "node:url"
import { siblingModule } from "./ModuleUrl.ts"

/** What the pool needs of a worker: a thread (`Worker`) or a child process (`startProcessWorker`). */
export interface PoolWorker {
  readonly on: (event: "message" | "error" | "exit", listener: (...args: Array<any>) => void) => unknown
  readonly postMessage: (message: unknown) => void
  readonly terminate: () => unknown
  readonly unref: () => unknown
}

/** The signal V8 ends a process with when its heap is full (`abort()`). */
const OUT_OF_MEMORY_SIGNAL = "SIGABRT"

/**
 * The children alive: killed when this process exits, whatever the way
 * (a child busy with a long step would not see its channel close). Only a
 * `SIGKILL` of this process leaves one running, until its step ends.
 */
const alive = new Set<ChildProcess>()
let killOnExit = false
const killAll = () => {
  for (const child of alive) child.kill("SIGKILL")
}

export const startProcessWorker = (script: URL, options: { readonly heapMb: number }): PoolWorker => {
  const events = new EventEmitter()
  const progress = new Map<number, Int32Array>()
  let killed = false
  const child: ChildProcess = fork(
    fileURLToPath(siblingModule("./compile-cached.ts", import.meta.url)),
    [script.href],
    {
      execArgv: [`--max-old-space-size=${options.heapMb}`],
      serialization: "json",
      // What V8 prints when the heap is full is the child's end, reported as an outcome; nothing to log.
      stdio: ["ignore", "ignore", "ignore", "ipc"]
    }
  )
  alive.add(child)
  if (!killOnExit) {
    killOnExit = true
    process.on("exit", killAll)
  }
  child.on("message", (message: any) => {
    if (typeof message === "object" && message !== null && typeof message.progress === "number") {
      const cell = progress.get(message.id)
      if (cell !== undefined) cell[0] = message.progress
      return
    }
    if (typeof message === "object" && message !== null) progress.delete(message.id)
    events.emit("message", message)
  })
  child.on("error", (error) => events.emit("error", error))
  child.on("exit", (code, signal) => {
    alive.delete(child)
    progress.clear()
    if (!killed && signal === OUT_OF_MEMORY_SIGNAL) {
      events.emit("error", Object.assign(new Error("the process's heap is full"), { code: "ERR_WORKER_OUT_OF_MEMORY" }))
    }
    events.emit("exit", code ?? 1)
  })
  return {
    on: (event, listener) => events.on(event, listener),
    postMessage: (message) => {
      if (!child.connected) return
      const { progress: cell, ...rest } = message as { id?: number; progress?: unknown }
      if (cell instanceof Int32Array && typeof rest.id === "number") progress.set(rest.id, cell)
      // A child that ended meanwhile: its `exit` settles the request.
      child.send(rest, () => undefined)
    },
    terminate: () => {
      killed = true
      child.kill("SIGKILL")
    },
    unref: () => {
      child.unref()
      child.channel?.unref()
    }
  }
}
