/**
 * An example agent run as a process of its own, as its page runs it: what it
 * prints is read line by line, and it is killed (by its own pid) if still
 * running when the test's scope closes.
 */
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { compileCache, root } from "./process.ts"

/** How long an example agent may run. */
export const AGENT_RUN_MS = 30_000

export interface Agent {
  readonly output: () => string
  /** Resolves with the first stdout line matching `pattern` (its match), or fails when the agent exits first. */
  readonly line: (pattern: RegExp) => Promise<RegExpExecArray>
  readonly exited: Promise<number | null>
}

/** Starts `command` in the repository's root with `env` over this process's (unbuffered output, no Node warnings). */
export const startAgent = (command: string, args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child: ChildProcess = spawn(command, args, {
        cwd: root,
        env: { ...process.env, ...compileCache, NODE_NO_WARNINGS: "1", PYTHONUNBUFFERED: "1", ...env },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let stdout = ""
      let stderr = ""
      const waiters = new Set<() => void>()
      child.stdout!.on("data", (chunk) => {
        stdout += chunk
        for (const wake of waiters) wake()
      })
      child.stderr!.on("data", (chunk) => (stderr += chunk))
      const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
      const output = () => `${stdout}${stderr === "" ? "" : `\n[stderr]\n${stderr}`}`
      const line = (pattern: RegExp) =>
        new Promise<RegExpExecArray>((resolve, reject) => {
          const check = () => {
            for (const l of stdout.split("\n")) {
              const match = pattern.exec(l)
              if (match !== null) {
                waiters.delete(check)
                return resolve(match)
              }
            }
          }
          waiters.add(check)
          check()
          void exited.then(() => {
            check()
            reject(new Error(`exited before printing ${pattern}:\n${output()}`))
          })
        })
      return { child, agent: { output, line, exited } satisfies Agent }
    }),
    ({ child }) =>
      Effect.sync(() => (child.exitCode === null && child.signalCode === null ? void child.kill("SIGKILL") : undefined))
  ).pipe(Effect.map(({ agent }) => agent))

/** Waits for the agent to finish within `AGENT_RUN_MS`: its exit code and the lines it printed. */
export const agentFinished = (agent: Agent) =>
  Effect.promise(() => agent.exited).pipe(
    Effect.timeoutOrElse({
      duration: AGENT_RUN_MS,
      orElse: () => Effect.die(new Error(`the agent did not finish within ${AGENT_RUN_MS} ms:\n${agent.output()}`))
    }),
    Effect.map((code) => ({ code, lines: agent.output().trim().split("\n") }))
  )
