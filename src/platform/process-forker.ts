/**
 * The forker: a small process that starts svc's child processes (the rule
 * workers, `ProcessWorker.ts`) when asked, and relays their messages and
 * ends. It loads nothing but `node:child_process`, so starting a child costs
 * its own `fork()` of a few tens of megabytes, not svc's.
 *
 * Speeds up: replacing a rule worker ended at its deadline or heap. Node
 * starts a child with `fork()`, which copies the page tables of the process
 * that asks: from svc at about 575 MB resident it held svc's event loop
 * 23-75 ms per child, and three rules over their heap in a row another
 * organization's p95 past its bound (test/hostile/rule-memory.test.ts).
 *
 * Protocol (JSON over the channel): svc sends `{ start, module, args,
 * execArgv }`, `{ to, message }` and `{ kill }`; the forker answers
 * `{ from, pid }` once a child started, `{ from, message }`,
 * `{ from, error }` and `{ from, exit, signal }`. When svc's channel
 * closes (svc ended, whatever the way), every child is killed and the
 * forker ends.
 */
import { type ChildProcess, fork } from "node:child_process"

export type ForkerCommand =
  | {
    readonly start: number
    readonly module: string
    readonly args: ReadonlyArray<string>
    readonly execArgv: ReadonlyArray<string>
  }
  | { readonly to: number; readonly message: unknown }
  | { readonly kill: number }

export type ForkerReport =
  | { readonly from: number; readonly pid: number }
  | { readonly from: number; readonly message: unknown }
  | { readonly from: number; readonly error: string }
  | { readonly from: number; readonly exit: number | null; readonly signal: NodeJS.Signals | null }

const children = new Map<number, ChildProcess>()

const report = (message: ForkerReport) => {
  if (process.connected) process.send!(message, () => undefined)
}

const start = (command: Extract<ForkerCommand, { start: number }>) => {
  const id = command.start
  const child = fork(command.module, [...command.args], {
    execArgv: [...command.execArgv],
    serialization: "json",
    // What V8 prints when the heap is full is the child's end, reported as an exit; nothing to log.
    stdio: ["ignore", "ignore", "ignore", "ipc"]
  })
  children.set(id, child)
  if (child.pid !== undefined) report({ from: id, pid: child.pid })
  child.on("message", (message) => report({ from: id, message }))
  child.on("error", (error) => report({ from: id, error: error.message }))
  child.on("exit", (exit, signal) => {
    children.delete(id)
    report({ from: id, exit, signal })
  })
}

process.on("message", (command: ForkerCommand) => {
  if ("start" in command) start(command)
  else if ("to" in command) {
    const child = children.get(command.to)
    if (child?.connected) child.send(command.message as object, () => undefined)
  } else children.get(command.kill)?.kill("SIGKILL")
})

process.on("disconnect", () => {
  for (const child of children.values()) child.kill("SIGKILL")
  process.exit(0)
})
