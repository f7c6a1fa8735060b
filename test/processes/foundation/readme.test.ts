/**
 * The README stays true: its quick start and first calls run as a newcomer
 * runs them, block by block, against a fresh data folder: `npm start` as a
 * real server, the CLI through `npm run`, `curl` and `jq` in bash, the
 * example receiver as a background job, from a shell PATH without
 * node_modules/.bin. What the README says an answer or the receiver shows
 * (`# {...}` and `# receiver: {...}` comments) must be there.
 *
 * The test's only changes to the commands: its ports and folders are its
 * own (8080 and 8787 become free ports, `.receiver-data/` a fresh folder,
 * `SVC_DATA_DIR` a fresh data folder), so it never meets a developer's
 * running svc. `npm install` and `npm test` are checked to be what the
 * README says, not run again.
 */
import { assert, describe, it } from "@effect/vitest"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { onServerRun } from "../../support/databases.ts"
import { read } from "../../support/markdown.ts"
import { root } from "../../support/process.ts"
import { blocksRun, RUN_SECTIONS } from "../../support/run-blocks.ts"

/** The README's shell blocks under one `##` heading, in order: the ones `RUN_SECTIONS` says this test runs. */
const shellBlocksOf = (text: string, heading: string): Array<string> => {
  assert.isTrue(
    RUN_SECTIONS.some((run) => run.page === "README.md" && run.section === heading),
    `"${heading}" is one of RUN_SECTIONS`
  )
  assert.include(text, `\n## ${heading}\n`, `the README has a "${heading}" section`)
  return blocksRun("README.md", heading, text).map((block) => block.code)
}

/** A block's commands: continuation lines joined, comments and blank lines left out. */
const commandsOf = (block: string): Array<string> =>
  block.split("\n").reduce<Array<string>>((commands, line) => {
    const last = commands.at(-1)
    if (last !== undefined && last.endsWith("\\")) commands[commands.length - 1] = `${last}\n${line}`
    else if (line.trim() !== "" && !line.trimStart().startsWith("#")) commands.push(line)
    return commands
  }, []).map((command) => command.replace(/\s+#[^'"\n]*$/, "").trimEnd())

/** What the README promises in `# {...}` comments: its literal `"key":value` pairs (those without `…`). */
const promisedPairs = (comment: string): Array<string> =>
  [...comment.matchAll(/"[a-z_]+":(?:"[^"…]*"|-?\d+|true|false|null|\{[^{}…]*\})(?=[,}])/g)].map((match) => match[0])

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

/** A shell outside npm scripts: no node_modules/.bin on PATH, no npm_* variables. */
const newcomerEnv = (extra: Record<string, string>): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !key.startsWith("npm_")) env[key] = value
  }
  env.PATH = (process.env.PATH ?? "").split(path.delimiter).filter((dir) => !dir.includes("node_modules")).join(
    path.delimiter
  )
  return { ...env, NO_COLOR: "1", DATABASE_URL: "", ...extra }
}

interface Job {
  readonly child: ChildProcess
  readonly output: () => string
  readonly exited: Promise<number | null>
}

const startJob = (script: string, env: Record<string, string>): Job => {
  const child = spawn("bash", ["-c", script], { cwd: root, env, detached: true, stdio: ["ignore", "pipe", "pipe"] })
  let output = ""
  child.stdout!.on("data", (chunk) => (output += chunk))
  child.stderr!.on("data", (chunk) => (output += chunk))
  return { child, output: () => output, exited: new Promise((resolve) => child.on("exit", (code) => resolve(code))) }
}

/** Ends a job's whole process group (npm and the node it runs), as Ctrl-C would, and waits for it. */
const stopJob = async (job: Job) => {
  if (job.child.exitCode !== null || job.child.signalCode !== null) return
  process.kill(-job.child.pid!, "SIGTERM")
  const killer = setTimeout(() => process.kill(-job.child.pid!, "SIGKILL"), 30_000)
  await job.exited
  // npm can exit before the svc it started has finished its shutdown and
  // let go of the data folder: the terminal's next command waits for all of them.
  const groupAlive = () => {
    try {
      process.kill(-job.child.pid!, 0)
      return true
    } catch {
      return false
    }
  }
  while (groupAlive()) await new Promise((resolve) => setTimeout(resolve, 50))
  clearTimeout(killer)
}

const waitFor = async (what: string, condition: () => boolean, job: Job, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (job.child.exitCode !== null) {
      throw new Error(`${what}: the process exited ${job.child.exitCode}:\n${job.output()}`)
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms:\n${job.output()}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

const jq = spawnSync("jq", ["--version"]).status === 0
const curl = spawnSync("curl", ["--version"]).status === 0

describe.skipIf(onServerRun)("the README, as a newcomer runs it", () => {
  const readme = read("README.md")

  it("the quick start is npm install, npm start and npm test, the scripts this checkout defines", () => {
    const quickStart = shellBlocksOf(readme, "Quick start").flatMap(commandsOf)
    assert.deepStrictEqual(quickStart, ["npm install", "npm start", "npm test"])
    const scripts = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")).scripts
    assert.strictEqual(scripts.test, "vitest run")
    assert.strictEqual(scripts.start, "node src/main.ts")
  })

  // Without curl or jq a developer's run skips this with a warning; CI fails (.ci/run installs them).
  if ((!jq || !curl) && process.env.CI === undefined) {
    console.warn("\n*** SKIPPED the README's first calls: install curl and jq ***\n")
  }
  it.skipIf((!jq || !curl) && process.env.CI === undefined)(
    "npm start, then every first call, through a verified webhook delivery",
    async () => {
      assert.isTrue(jq && curl, "the README's first calls need curl and jq")
      const [svcPort, receiverPort] = [await freePort(), await freePort()]
      const work = fs.mkdtempSync(path.join(os.tmpdir(), "svc-readme-"))
      const dataDir = path.join(work, "data")
      const receiverData = path.join(work, "receiver-data")
      const state = path.join(work, "state.sh")
      fs.writeFileSync(state, "")
      const env = newcomerEnv({
        SVC_DATA_DIR: dataDir,
        RECEIVER_DATA: receiverData,
        SVC_BASE_URL: `http://127.0.0.1:${svcPort}`
      })
      const localize = (command: string) =>
        command
          .replaceAll("127.0.0.1:8080", `127.0.0.1:${svcPort}`)
          .replaceAll("127.0.0.1:8787", `127.0.0.1:${receiverPort}`)
          .replaceAll(".receiver-data/", `${receiverData}/`)
      // Variables carry from one block to the next as in one terminal: each
      // block starts from what the previous ones set, and exports what it sets.
      const inTerminal = (commands: ReadonlyArray<string>) =>
        `set -a; . '${state}'; set -eo pipefail\n${commands.map(localize).join("\n")}\nexport -p > '${state}'`

      const jobs: Array<Job> = []
      let server: Job | undefined
      const startServer = async (prefix: string) => {
        if (server !== undefined) await stopJob(server) // Ctrl-C in its terminal
        server = startJob(`exec env PORT=${svcPort} ${localize(prefix)} npm start`, env)
        jobs.push(server)
        await waitFor(
          "npm start listens",
          () => server!.output().includes("\"message\":\"svc listening\""),
          server,
          180_000
        )
      }

      try {
        await startServer("")
        const blocks = shellBlocksOf(readme, "Your first calls")
        assert.isAtLeast(blocks.length, 5)
        const transcript: Array<string> = []
        for (const block of blocks) {
          const commands = commandsOf(block)
          const foreground: Array<string> = []
          const runForeground = () => {
            if (foreground.length === 0) return
            const ran = spawnSync("bash", ["-c", inTerminal(foreground)], {
              cwd: root,
              env,
              encoding: "utf8",
              timeout: 180_000
            })
            const text = `${ran.stdout}${ran.stderr}`
            transcript.push(text)
            // The receiver's first run only makes its certificate and says where, and succeeds.
            if (foreground.join("\n").trim() === "npm run example:receiver") {
              assert.include(text, `${receiverData}/receiver-cert.pem`)
            }
            assert.strictEqual(ran.status, 0, `${foreground.join("\n")}\n${text}`)
            foreground.length = 0
          }
          for (const command of commands) {
            const start = /^(.*?)\bnpm start$/.exec(command)
            if (start !== null) {
              runForeground()
              await startServer(start[1]!)
            } else if (command.endsWith("&")) {
              runForeground()
              const job = startJob(
                `set -a; . '${state}'; exec env PORT=${receiverPort} ${localize(command.slice(0, -1))}`,
                env
              )
              jobs.push(job)
              await waitFor(
                "the receiver listens",
                () => job.output().includes("example receiver listening"),
                job,
                60_000
              )
            } else {
              foreground.push(command)
            }
          }
          runForeground()
          // What the block's comments promise of an answer is in what it printed.
          for (
            const comment of block.split("\n").filter((line) => line.trim().startsWith("# {"))
          ) {
            for (const pair of promisedPairs(comment)) {
              assert.include(transcript.at(-1) ?? "", pair, `promised by README: ${comment}`)
            }
          }
        }

        const variables = fs.readFileSync(state, "utf8")
        for (const name of ["ORG", "KEY", "TASK", "TRACE", "SECRET", "SESSION", "APPROVAL"]) {
          const value = new RegExp(`declare -x ${name}="([^"]*)"`).exec(variables)?.[1]
          assert.isString(value, `${name} was set`)
          assert.notInclude(["", "null"], value!, `${name} holds a value`)
        }
        assert.include(transcript.join("\n"), "/console/sign-in#svl_")

        // The receiver verified and saved what the README says it shows.
        const receiver = jobs.find((job) => job.output().includes("example receiver listening"))!
        const shown = blocks.join("\n").split("\n").flatMap((line) => {
          const comment = /^#\s+(?:receiver:)?\s+(\{"message".*)$/.exec(line.trim())
          return comment === null ? [] : [promisedPairs(comment[1]!)]
        })
        assert.isAtLeast(shown.length, 3)
        await waitFor(
          "the receiver shows every line the README says it does",
          () =>
            shown.every((pairs) =>
              receiver.output().split("\n").some((line) => pairs.every((pair) => line.includes(pair)))
            ),
          receiver,
          60_000
        )
        assert.notInclude(receiver.output(), "delivery refused")
      } finally {
        for (const job of jobs.reverse()) await stopJob(job)
        fs.rmSync(work, { recursive: true, force: true })
      }
    },
    600_000
  )

  it("the reading of the README's blocks: continuations joined, comments dropped, promises found", () => {
    assert.deepStrictEqual(
      commandsOf("# a comment\nA=$(curl -s \\\n  -d '{\"a\":1}' | jq -r .id)\n\nnpm start   # and a note\nx &"),
      [
        "A=$(curl -s \\\n  -d '{\"a\":1}' | jq -r .id)",
        "npm start",
        "x &"
      ]
    )
    assert.deepStrictEqual(
      promisedPairs("{\"id\":\"…\",\"score\":-1,\"correction\":{\"label\":\"hardware\"},\"status\":\"pending\",…}"),
      [
        "\"score\":-1",
        "\"correction\":{\"label\":\"hardware\"}",
        "\"status\":\"pending\""
      ]
    )
  })
})
