/** A worker for `test/unit/platform/worker-pool.test.ts`: spends the given milliseconds in each given phase. */
import { parentPort, workerData } from "node:worker_threads"
import { enterPhase, type PhaseCell } from "../../src/platform/WorkerPhase.ts"

const port = parentPort!
const cell = (workerData as { phaseCell?: PhaseCell } | undefined)?.phaseCell

port.on("message", (request: { id: number; steps: ReadonlyArray<readonly [phase: number, ms: number]> }) => {
  const receivedAt = performance.now()
  for (const [phase, ms] of request.steps) {
    enterPhase(cell, receivedAt, phase)
    const until = Date.now() + ms
    while (Date.now() < until) {
      // busy: only termination stops this
    }
  }
  port.postMessage({ id: request.id, _tag: "Done" })
})
port.postMessage("ready")
