/**
 * A validation worker: compiles answer schemas and checks values against
 * them, off the service's event loop. `AnswerSchemas` runs a few of these,
 * gives each request a deadline and terminates a worker that misses it, so
 * a schema or a value that costs too much (a backtracking `pattern`,
 * `uniqueItems` over a huge array, a schema that takes long to compile)
 * costs only that request.
 */
import { parentPort, workerData } from "node:worker_threads"
import { makeSchemaCompiler, warmUp } from "./SchemaCompiler.ts"

export type WorkerRequest =
  | { readonly id: number; readonly op: "check"; readonly key: string; readonly schema: unknown }
  | {
    readonly id: number
    readonly op: "validate"
    readonly key: string
    readonly schema?: unknown
    readonly value: unknown
  }
  | { readonly id: number; readonly op: "stats" }

export type WorkerReply =
  | { readonly id: number; readonly _tag: "Ok" }
  | { readonly id: number; readonly _tag: "Unusable"; readonly message: string }
  | { readonly id: number; readonly _tag: "Missing" }
  | {
    readonly id: number
    readonly _tag: "Checked"
    readonly violations: ReadonlyArray<{ path: string; message: string; keyword: string }>
  }
  | { readonly id: number; readonly _tag: "Stats"; readonly cached: number; readonly registered: number }

const port = parentPort!
const compiler = makeSchemaCompiler((workerData as { cacheEntries: number }).cacheEntries)

port.on("message", (request: WorkerRequest) => {
  let reply: WorkerReply
  switch (request.op) {
    case "check": {
      const compiled = compiler.prepare(request.key, request.schema)
      reply = compiled.ok
        ? { id: request.id, _tag: "Ok" }
        : { id: request.id, _tag: "Unusable", message: compiled.message }
      break
    }
    case "validate": {
      if (request.schema === undefined && !compiler.has(request.key)) {
        reply = { id: request.id, _tag: "Missing" }
        break
      }
      const result = compiler.validate(request.key, request.schema, request.value)
      reply = result._tag === "Checked"
        ? { id: request.id, _tag: "Checked", violations: result.violations }
        : { id: request.id, _tag: "Unusable", message: result.message }
      break
    }
    case "stats":
      reply = { id: request.id, _tag: "Stats", ...compiler.stats() }
      break
  }
  port.postMessage(reply)
})

warmUp(compiler)
port.postMessage("ready")
