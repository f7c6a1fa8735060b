/**
 * Preloaded (`NODE_OPTIONS=--import=...`) into a process a test starts:
 * each worker thread of that process appends a line to the file
 * `SVC_TEST_WORKER_LOG` names, so the test sees which threads it started.
 */
import * as fs from "node:fs"
import { isMainThread } from "node:worker_threads"

const log = process.env.SVC_TEST_WORKER_LOG
if (!isMainThread && log !== undefined) fs.appendFileSync(log, `worker ${process.pid}\n`)
