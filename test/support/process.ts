/** Run `svc` entry points as real child processes (the CLI, the server). */
import { spawn, type ChildProcess } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

export interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs `node <script> ...args` to completion with extra environment. */
export const runNode = (script: string, args: ReadonlyArray<string>, env: Record<string, string>) =>
  new Promise<Ran>((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(root, script), ...args], {
      cwd: root,
      env: { ...process.env, ...env, NODE_NO_WARNINGS: "1" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => (stdout += chunk))
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

export const cli = (args: ReadonlyArray<string>, env: Record<string, string>) => runNode("src/cli/main.ts", args, env)

export interface RunningServer {
  readonly child: ChildProcess
  readonly baseUrl: string
  readonly output: () => string
  /** Resolves with the exit code after the process ends. */
  readonly exited: Promise<number | null>
}

/** Starts `node src/main.ts` and resolves once it logs that it listens. */
export const startServer = (env: Record<string, string>, timeoutMs = 60_000) =>
  new Promise<RunningServer>((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(root, "src/main.ts")], {
      cwd: root,
      env: { ...process.env, PORT: "0", ...env, NODE_NO_WARNINGS: "1" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)))
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), timeoutMs)
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      const match = /"message":"svc listening","address":"(http:\/\/[^"]+)"/.exec(output)
      if (match) {
        clearTimeout(timer)
        resolve({ child, baseUrl: match[1]!, output: () => output, exited })
      }
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", (chunk) => (output += chunk.toString()))
    void exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`server exited with ${code}:\n${output}`))
    })
  })
