/**
 * A scrub worker: removes protected values from corrections (and from the
 * issue lists answered about them) off the service's event loop. Scrubbing
 * a correction near the body limit runs many patterns over up to a
 * megabyte of text (a tenth of a second and more), so `Feedback` runs it
 * here, under the same deadline and per-organization turns as schema checks
 * (`WorkerPool.ts`).
 */
import { parentPort } from "node:worker_threads"
import { type Json, scrub, type ScrubResult } from "./Scrubber.ts"

export type ScrubRequest =
  | {
    readonly id: number
    readonly op: "scrub"
    readonly document: Json
    readonly keyHashes: ReadonlyArray<string>
    readonly values: ReadonlyArray<string>
    readonly root: string
  }
  | { readonly id: number; readonly op: "stats" }

export type ScrubReply =
  | ({ readonly id: number; readonly _tag: "Scrubbed" } & ScrubResult)
  | { readonly id: number; readonly _tag: "Failed"; readonly message: string }
  | { readonly id: number; readonly _tag: "Stats" }

const port = parentPort!

port.on("message", (request: ScrubRequest) => {
  if (request.op === "stats") {
    port.postMessage({ id: request.id, _tag: "Stats" } satisfies ScrubReply)
    return
  }
  scrub(request.document, { keyHashes: new Set(request.keyHashes), values: request.values }, request.root).then(
    (result) => port.postMessage({ id: request.id, _tag: "Scrubbed", ...result } satisfies ScrubReply),
    (error: unknown) =>
      port.postMessage({ id: request.id, _tag: "Failed", message: error instanceof Error ? error.name : "scrub failed" } satisfies ScrubReply)
  )
})

// Loading the rule set and running it once costs about a second: before
// taking requests, so no request's deadline pays for it.
await scrub({ warm: "up" }, { keyHashes: new Set(), values: [] })
port.postMessage("ready")
