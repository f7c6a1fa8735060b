/**
 * A pool's child-process workers (`ProcessWorker.ts`) are started by the
 * forker (`process-forker.ts`), not by this process: starting or replacing
 * one forks the small forker, never this process; they answer as before;
 * a terminated one exits; and when the forker ends, so do its children.
 */
import fs from "node:fs"
import { afterAll, assert, describe, it } from "vitest"
import { type PoolWorker, startProcessWorker } from "../../../src/platform/ProcessWorker.ts"

const RULE_WORKER = new URL("../../../src/approvals/rule-worker.ts", import.meta.url)

/** The direct children of this process (`/proc/<pid>/task/<tid>/children`). */
const children = (): Array<number> =>
  fs.readdirSync(`/proc/${process.pid}/task`).flatMap((tid) =>
    fs.readFileSync(`/proc/${process.pid}/task/${tid}/children`, "utf8").split(" ").filter((pid) => pid !== "").map(
      Number
    )
  )

const parentOf = (pid: number) => Number(fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[1])

const ready = (worker: PoolWorker) =>
  new Promise<void>((resolve) => worker.on("message", (message) => message === "ready" && resolve()))
const exited = (worker: PoolWorker) => new Promise<number>((resolve) => worker.on("exit", resolve))
const reply = (worker: PoolWorker, request: object) =>
  new Promise<any>((resolve) => {
    worker.on("message", (message) => typeof message === "object" && message.id === 7 && resolve(message))
    worker.postMessage({ id: 7, ...request })
  })

describe("child-process workers", () => {
  const started: Array<PoolWorker> = []
  afterAll(() => {
    for (const worker of started) worker.terminate()
  })

  it(
    "are started by one forker: three workers and a replacement add no child to this process but the forker",
    async () => {
      // Test files share a process (no isolation), so a forker may already run: it is the one taken.
      const before = new Set(children())
      const childrenOf = (pid: number) =>
        fs.readdirSync(`/proc/${pid}/task`).flatMap((tid) =>
          fs.readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").split(" ").filter((child) => child !== "").map(
            Number
          )
        )
      const forkers = () =>
        children().filter((pid) => fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("process-forker"))
      const earlier = new Set(forkers().flatMap(childrenOf))
      const workers = [0, 1, 2].map(() => startProcessWorker(RULE_WORKER, { heapMb: 64 }))
      started.push(...workers)
      await Promise.all(workers.map(ready))
      assert.lengthOf(forkers(), 1)
      const forker = forkers()[0]!
      const added = children().filter((pid) => !before.has(pid))
      assert.isTrue(added.every((pid) => pid === forker), `new children: ${added.join(", ")}`)
      // The workers are the forker's children.
      const theirs = childrenOf(forker).filter((pid) => !earlier.has(pid))
      assert.strictEqual(theirs.length, 3)
      for (const pid of theirs) assert.strictEqual(parentOf(pid), forker)
      // They answer through it.
      const edited = await reply(workers[0]!, { op: "edit", before: { a: 1 }, after: { a: 2 } })
      assert.deepStrictEqual([edited._tag, edited.changed], ["Edited", ["/a"]])
      // A terminated one exits; its replacement adds no child here either.
      const end = exited(workers[0]!)
      workers[0]!.terminate()
      await end
      const replacement = startProcessWorker(RULE_WORKER, { heapMb: 64 })
      started.push(replacement)
      await ready(replacement)
      assert.isTrue(children().filter((pid) => !before.has(pid)).every((pid) => pid === forker))
    },
    60_000
  )

  it("end with the forker, which the next worker starts again", async () => {
    const worker = startProcessWorker(RULE_WORKER, { heapMb: 64 })
    started.push(worker)
    await ready(worker)
    const before = children()
    const end = exited(worker)
    for (const pid of before) {
      if (fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("process-forker")) {
        process.kill(pid, "SIGKILL")
      }
    }
    await end
    const next = startProcessWorker(RULE_WORKER, { heapMb: 64 })
    started.push(next)
    await ready(next)
    const edited = await reply(next, { op: "edit", before: [1], after: [1, 2] })
    assert.strictEqual(edited._tag, "Edited")
  }, 60_000)
})
