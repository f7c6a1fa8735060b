/**
 * Preloaded (`NODE_OPTIONS=--import=...`) into a process a test starts:
 * each worker thread of that process appends a line to the file
 * `SVC_TEST_WORKER_LOG` names, so the test sees which threads it started:
 * `early` for the embedded database's worker its entry point started
 * before loading the rest (`EarlyWorker.ts`), `late` for any other.
 */
import * as fs from "node:fs"
import { isMainThread, workerData } from "node:worker_threads"

const log = process.env.SVC_TEST_WORKER_LOG
if (!isMainThread && log !== undefined) {
  fs.appendFileSync(log, `${(workerData as { early?: boolean } | null)?.early === true ? "early" : "late"}\n`)
}
