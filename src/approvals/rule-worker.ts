/**
 * A rule runner: checks a policy's rules when it is stored, evaluates them
 * on arguments for a step, computes what an edit changed and its digest,
 * and scrubs a decision's response of recognizable secrets, off the
 * service's event loop. `RuleWorkers` runs a few of these as child processes
 * (`../platform/ProcessWorker.ts`, `../platform/WorkerPool.ts`), gives each
 * request a deadline and kills a runner that misses it or runs out of heap,
 * so a rule or an edit that costs too much (a rule that builds lists and
 * strings of its own with `split`, `map` or `cel.bind`) costs only that
 * request. It also runs as a worker thread (`parentPort`), as the tests of
 * the pool start it.
 */
import { parentPort } from "node:worker_threads"
import type { PolicyRule } from "../api/Policies.ts"
import type { Json as Document } from "../feedback/Scrubber.ts"
import { exitWithParent, reportProgress } from "../platform/ProcessChild.ts"
import { argumentsDigest, changedPointers } from "./ArgumentsDiff.ts"
import {
  compileRules,
  evaluate,
  type Evaluation,
  programsOf,
  type RuleLimits,
  type RuleProblem,
  type StepFacts
} from "./Rules.ts"

type Json = Parameters<typeof changedPointers>[0]

export type RuleWorkerRequest =
  | {
    readonly id: number
    readonly op: "rules"
    readonly conditions: ReadonlyArray<string>
    readonly maxNodes: number
    readonly maxDepth: number
    readonly facts: StepFacts
    /**
     * Where the runner marks the rule it is evaluating: a rule over the
     * deadline is named from it. In a thread, shared memory; in a child
     * process, kept by the parent and written from the child's messages.
     */
    readonly progress?: Int32Array
  }
  | { readonly id: number; readonly op: "edit"; readonly before: Json; readonly after: Json }
  | { readonly id: number; readonly op: "scrub"; readonly document: Document }
  | {
    readonly id: number
    readonly op: "check"
    readonly rules: ReadonlyArray<PolicyRule>
    readonly limits: RuleLimits
  }

export type RuleWorkerReply =
  | { readonly id: number; readonly _tag: "Evaluated"; readonly evaluation: Evaluation }
  | { readonly id: number; readonly _tag: "Edited"; readonly changed: ReadonlyArray<string>; readonly digest: string }
  | { readonly id: number; readonly _tag: "Scrubbed"; readonly document: Document }
  /** What is wrong with a policy's rules (the first problem), or nothing. */
  | { readonly id: number; readonly _tag: "Checked"; readonly problem: RuleProblem | null }

/** The parent: a thread's port, or a child process's channel. */
const port = parentPort ?? {
  on: (_event: "message", listener: (request: RuleWorkerRequest) => void) => process.on("message", listener),
  postMessage: (message: RuleWorkerReply | "ready") => process.send!(message)
}
if (parentPort === null) exitWithParent()

/** Marks rule `index` of `request` as the one running. */
const mark = (request: Extract<RuleWorkerRequest, { op: "rules" }>, index: number) => {
  if (request.progress !== undefined) Atomics.store(request.progress, 0, index)
  else reportProgress(request.id, index)
}

/**
 * The scrubber, loaded by the first response that needs it rather than when
 * the runner starts: its ruleset takes a few hundred milliseconds to load,
 * which would hold a runner's first rules past their deadline, and a runner
 * replaced after a rule over budget starts without it.
 */
let scrubber: Promise<typeof import("./ResponseScrub.ts")> | undefined

port.on("message", (request: RuleWorkerRequest) => {
  let reply: RuleWorkerReply
  switch (request.op) {
    case "scrub": {
      const { id, document } = request
      scrubber ??= import("./ResponseScrub.ts")
      void scrubber.then((module) => module.responseScrubbed(document)).then((scrubbed) =>
        port.postMessage({ id, _tag: "Scrubbed", document: scrubbed })
      )
      return
    }
    case "rules": {
      let evaluation: Evaluation
      let running = 0
      try {
        const programs = programsOf(request.conditions, request)
        evaluation = evaluate(programs, request.facts, (index) => {
          running = index
          mark(request, index)
        })
      } catch (error) {
        // A stored condition that no longer parses (the limits were lowered
        // since): it fails, and the class's settings decide.
        const message = error instanceof Error ? error.message.split("\n")[0]! : String(error)
        evaluation = { failed: running, message }
      }
      reply = { id: request.id, _tag: "Evaluated", evaluation }
      break
    }
    case "check": {
      const compiled = compileRules(request.rules, request.limits)
      reply = { id: request.id, _tag: "Checked", problem: compiled.ok ? null : compiled.problem }
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
