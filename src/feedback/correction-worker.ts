/**
 * A correction worker: checks a correction against its task's answer
 * schema, removes protected values from it and, when that changed it,
 * checks it again, all in one round trip off the service's event loop.
 * It also scrubs the issue lists answered about a correction that does not
 * fit. `Feedback` runs a few of these (`WorkerPool.ts`) with a deadline per
 * phase: checking (`SVC_ANSWER_VALIDATION_TIMEOUT`), scrubbing
 * (`SVC_SCRUB_TIMEOUT`), checking again (`SVC_ANSWER_VALIDATION_TIMEOUT`);
 * a worker that misses one is terminated and the request refused naming it.
 *
 * Compiled validators are kept per worker (`SVC_ANSWER_VALIDATION_CACHE`,
 * least recently used dropped); the worker answers `Missing` when it does
 * not hold the task's and is sent the schema again.
 */
import { parentPort, workerData } from "node:worker_threads"
import { enterPhase, type PhaseCell } from "../platform/WorkerPhase.ts"
import { makeSchemaCompiler, type SchemaViolation, warmUp } from "../tasks/SchemaCompiler.ts"
import {
  type CorrectionReply,
  type CorrectionRequest,
  KNOWN_KEPT_PER_WORKER,
  type KnownRef,
  phaseIndex
} from "./CorrectionWork.ts"
import { type Json, type KnownCredentials, scrub } from "./Scrubber.ts"

const port = parentPort!
const data = workerData as { readonly cacheEntries: number; readonly phaseCell?: PhaseCell }
const cell = data.phaseCell
const compiler = makeSchemaCompiler(data.cacheEntries)

/** Known credentials per organization, under the fingerprint they were sent with. */
const knownByOrg = new Map<string, { readonly fingerprint: string; readonly known: KnownCredentials }>()

/** The organization's known credentials of this fingerprint: kept, or sent with the request (then kept). */
const knownOf = (ref: KnownRef): KnownCredentials | undefined => {
  const kept = knownByOrg.get(ref.org)
  const entry = ref.known === undefined
    ? kept?.fingerprint === ref.fingerprint ? kept : undefined
    : { fingerprint: ref.fingerprint, known: { keyHashes: new Set(ref.known.keyHashes), values: ref.known.values } }
  if (entry === undefined) return undefined
  // Most recently used last.
  knownByOrg.delete(ref.org)
  if (knownByOrg.size >= KNOWN_KEPT_PER_WORKER) knownByOrg.delete(knownByOrg.keys().next().value!)
  knownByOrg.set(ref.org, entry)
  return entry.known
}

const failed = (id: number, message: string): CorrectionReply => ({ id, _tag: "Failed", message })

/** `receivedAt`: `performance.now()` when the request arrived, the start of its phases' offsets. */
const handle = async (request: CorrectionRequest, receivedAt: number): Promise<CorrectionReply> => {
  switch (request.op) {
    case "stats":
      return { id: request.id, _tag: "Stats", cached: compiler.stats().cached }
    case "scrub": {
      const known = knownOf(request.known)
      if (known === undefined) return { id: request.id, _tag: "Missing", schema: false, known: true }
      enterPhase(cell, receivedAt, phaseIndex("scrub"))
      return { id: request.id, _tag: "Scrubbed", ...(await scrub(request.document, known, request.root)) }
    }
    case "correct": {
      const known = knownOf(request.known)
      const noSchema = request.schema === undefined && !compiler.has(request.key)
      if (noSchema || known === undefined) {
        return { id: request.id, _tag: "Missing", schema: noSchema, known: known === undefined }
      }
      const document = JSON.parse(request.text) as Json
      const checked = compiler.validate(request.key, request.schema, document)
      // A stored schema was checked on the way in; failing now is a bug.
      if (checked._tag === "Unusable") return failed(request.id, `stored answer schema is unusable: ${checked.message}`)
      if (checked.violations.length > 0) return { id: request.id, _tag: "Mismatch", violations: checked.violations }
      enterPhase(cell, receivedAt, phaseIndex("scrub"))
      const { value, fields, collisions } = await scrub(document, known, request.root)
      let after: ReadonlyArray<SchemaViolation> = []
      if (fields.length > 0 && collisions.length === 0) {
        enterPhase(cell, receivedAt, phaseIndex("recheck"))
        const again = compiler.validate(request.key, undefined, value)
        if (again._tag === "Unusable") return failed(request.id, `stored answer schema is unusable: ${again.message}`)
        after = again.violations
      }
      const changed = fields.length > 0 || collisions.length > 0
      return { id: request.id, _tag: "Corrected", fields, collisions, after, ...(changed ? { value } : {}) }
    }
  }
}

port.on("message", (request: CorrectionRequest) => {
  handle(request, performance.now()).then(
    (reply) => port.postMessage(reply),
    (error: unknown) =>
      port.postMessage(failed(request.id, error instanceof Error ? error.name : "correction check failed"))
  )
})

// Loading the secret rules and running them once costs about a second:
// before taking requests, as the drafts' meta-schemas, so no request's
// deadline pays for them.
warmUp(compiler)
await scrub({ warm: "up" }, { keyHashes: new Set(), values: [] })
port.postMessage("ready")
