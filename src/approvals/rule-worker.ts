/**
 * A rule worker: evaluates a policy's rules on arguments for a step, and
 * computes what an edit changed and its digest, off the service's event
 * loop. `RuleWorkers` runs a few of these (`../platform/WorkerPool.ts`),
 * gives each request a deadline and terminates a worker that misses it or
 * runs out of heap, so a rule or an edit that costs too much (a rule that
 * builds lists and strings of its own with `split`, `map` or `cel.bind`)
 * costs only that request.
 */
import { parentPort } from "node:worker_threads"
import { argumentsDigest, changedPointers } from "./ArgumentsDiff.ts"
import { evaluate, type Evaluation, programsOf, type StepFacts } from "./Rules.ts"

type Json = Parameters<typeof changedPointers>[0]

export type RuleWorkerRequest =
  | {
    readonly id: number
    readonly op: "rules"
    readonly conditions: ReadonlyArray<string>
    readonly maxNodes: number
    readonly maxDepth: number
    readonly facts: StepFacts
    /** Where the worker marks the rule it is evaluating: a rule over the deadline is named from it. */
    readonly progress: Int32Array
  }
  | { readonly id: number; readonly op: "edit"; readonly before: Json; readonly after: Json }

export type RuleWorkerReply =
  | { readonly id: number; readonly _tag: "Evaluated"; readonly evaluation: Evaluation }
  | { readonly id: number; readonly _tag: "Edited"; readonly changed: ReadonlyArray<string>; readonly digest: string }

const port = parentPort!

port.on("message", (request: RuleWorkerRequest) => {
  let reply: RuleWorkerReply
  switch (request.op) {
    case "rules": {
      let evaluation: Evaluation
      try {
        const programs = programsOf(request.conditions, request)
        evaluation = evaluate(programs, request.facts, (index) => Atomics.store(request.progress, 0, index))
      } catch (error) {
        // A stored condition that no longer parses (the limits were lowered
        // since): it fails, and the class's settings decide.
        const message = error instanceof Error ? error.message.split("\n")[0]! : String(error)
        evaluation = { failed: Atomics.load(request.progress, 0), message }
      }
      reply = { id: request.id, _tag: "Evaluated", evaluation }
      break
    }
    case "edit":
      reply = {
        id: request.id,
        _tag: "Edited",
        changed: changedPointers(request.before, request.after),
        digest: argumentsDigest(request.after)
      }
      break
  }
  port.postMessage(reply)
})

port.postMessage("ready")
