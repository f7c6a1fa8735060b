/**
 * Every process of a benchmark other than svc (load generators, baselines,
 * receivers, sinks) is a child started with `spawnChild` and driven over
 * JSON lines: the parent writes `{id, cmd, args}` on the child's stdin, the
 * child answers `{id, result}` or `{id, error}` on its stdout (its stderr is
 * the parent's). The child exits when its stdin closes.
 */
import { spawn } from "node:child_process"
import { createInterface } from "node:readline"
import { cpuMicros } from "./cpu.ts"

export interface Child {
  readonly name: string
  readonly pid: number
  /** Sends `cmd` and resolves with the child's answer. */
  readonly call: <A = unknown>(cmd: string, args?: unknown) => Promise<A>
  /** CPU time (user + system, all threads) the process has used so far, in µs. */
  readonly cpu: () => number
  /** Closes its stdin and waits for it to exit (SIGKILL after 10 s). */
  readonly stop: () => Promise<void>
}

export const spawnChild = async (
  name: string,
  script: string | URL,
  env: Record<string, string> = {}
): Promise<Child> => {
  const proc = spawn(process.execPath, [script instanceof URL ? script.pathname : script], {
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "inherit"]
  })
  const pending = new Map<number, { resolve: (value: any) => void; reject: (error: Error) => void }>()
  let nextId = 0
  let exited = false
  const exit = new Promise<void>((resolve) => {
    proc.once("exit", (code, signal) => {
      exited = true
      for (const waiter of pending.values()) waiter.reject(new Error(`${name} exited (${code ?? signal})`))
      pending.clear()
      resolve()
    })
  })
  createInterface({ input: proc.stdout! }).on("line", (line) => {
    let message: { id?: number; result?: unknown; error?: string }
    try {
      message = JSON.parse(line)
    } catch {
      process.stderr.write(`[${name}] ${line}\n`)
      return
    }
    const waiter = message.id === undefined ? undefined : pending.get(message.id)
    if (waiter === undefined) return
    pending.delete(message.id!)
    if (message.error !== undefined) waiter.reject(new Error(`${name}: ${message.error}`))
    else waiter.resolve(message.result)
  })
  const call = <A>(cmd: string, args?: unknown) =>
    new Promise<A>((resolve, reject) => {
      if (exited) return reject(new Error(`${name} has exited`))
      const id = nextId++
      pending.set(id, { resolve, reject })
      proc.stdin!.write(`${JSON.stringify({ id, cmd, args })}\n`)
    })
  const child: Child = {
    name,
    pid: proc.pid!,
    call,
    cpu: () => cpuMicros(proc.pid!),
    stop: async () => {
      if (exited) return
      proc.stdin!.end()
      const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000)
      await exit
      clearTimeout(timer)
    }
  }
  await call("ready")
  return child
}

/** The child's side: answers each command with its handler; `ready` answers once the handlers are installed. */
export const serve = (handlers: Record<string, (args: any) => unknown>) => {
  const all: Record<string, (args: any) => unknown> = { ready: () => true, ...handlers }
  const reply = (message: unknown) => process.stdout.write(`${JSON.stringify(message)}\n`)
  createInterface({ input: process.stdin }).on("line", (line) => {
    const { id, cmd, args } = JSON.parse(line) as { id: number; cmd: string; args: unknown }
    const handler = all[cmd]
    if (handler === undefined) return reply({ id, error: `unknown command ${cmd}` })
    Promise.resolve()
      .then(() => handler(args))
      .then(
        (result) => reply({ id, result: result ?? null }),
        (error) => reply({ id, error: error instanceof Error ? (error.stack ?? error.message) : String(error) })
      )
  }).on("close", () => process.exit(0))
}
