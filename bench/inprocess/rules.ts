/**
 * Rules on arguments, in this process and in the rule workers: what one
 * step's evaluation costs by `RuleWorkers.run` (the event loop when the
 * cost is proved small, `InProcessRules.ts`, else a worker round trip), for
 * the ten rules of the `steps` scenario (`BENCH_RULES`), the same ten on a
 * step too heavy to prove (so in a worker), and the hostile rules of the
 * hardening work (`split`, `map`, `cel.bind`, string work in a
 * comprehension), which must end at `SVC_APPROVAL_RULES_TIMEOUT` or the
 * workers' heap. Wall time and this process's CPU (both threads) per call.
 */
import { Effect, Layer } from "effect"
import { DEFAULT_POLICY } from "../../src/approvals/Deadlines.ts"
import { type CompiledRule, compileRules, resolve, type RuleLimits } from "../../src/approvals/Rules.ts"
import { failedRule, RuleWorkers } from "../../src/approvals/RuleWorkers.ts"
import { SvcConfig } from "../../src/platform/Config.ts"
import { hostileRules } from "../../test/support/hostileRules.ts"
import { BENCH_RULES } from "../scenarios/steps.ts"

const LIMITS: RuleLimits = { maxRules: 50, maxLength: 2000, maxNodes: 200, maxDepth: 12 }
const quick = ["1", "true", "yes"].includes(process.env.BENCH_QUICK ?? "")
const RUNS = quick ? 200 : 2000
const HOSTILE_RUNS = quick ? 2 : 5

const compile = (
  rules: ReadonlyArray<{ name: string; condition: string; result: unknown }>
): ReadonlyArray<CompiledRule> => {
  const compiled = compileRules(rules as never, LIMITS)
  if (!compiled.ok) throw new Error(`${compiled.problem.field}: ${compiled.problem.detail}`)
  return compiled.rules
}

const step = (args: unknown, tool = "shell") => ({
  tool,
  arguments: args,
  session: { id: "00000000-0000-4000-8000-000000000000" }
})

const quantile = (sorted: ReadonlyArray<number>, q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN
const round = (n: number) => Math.round(n * 10) / 10

export default async () => {
  const program = Effect.gen(function*() {
    const workers = yield* RuleWorkers
    const config = yield* SvcConfig
    const shapes = [
      {
        name: "steps scenario's 10 rules, small step",
        rules: compile(BENCH_RULES),
        args: { command: "ls -la /srv/app", cwd: "/srv" },
        runs: RUNS
      },
      {
        name: "the same 10 rules, a 64 KB step (in a worker)",
        rules: compile(BENCH_RULES),
        args: { command: "ls -la /srv/app", cwd: "/srv", note: "x".repeat(64 * 1024) },
        runs: RUNS
      },
      ...hostileRules().map((hostile) => ({
        name: `hostile: ${hostile.name}`,
        rules: compile([hostile.rule]),
        args: hostile.arguments,
        runs: HOSTILE_RUNS
      }))
    ]
    const rows = []
    for (const shape of shapes) {
      const facts = step(shape.args)
      let answer = ""
      const once = Effect.map(
        workers.run("bench", shape.rules, facts).pipe(
          Effect.catchTag("OverBudget", (over) => Effect.succeed(failedRule(shape.rules, over)))
        ),
        (verdict) => {
          const resolution = resolve(DEFAULT_POLICY, verdict)
          answer = resolution.rule ?? (resolution.error ? `error: ${resolution.error.message}` : "none")
        }
      )
      // A worker replaced after a deadline starts again (its start is not the rule's cost): each timed call waits for one ready first.
      const ready = workers.run(
        "bench",
        compile([{ name: "ready", condition: "[1].exists(x, x == 2)", result: { decision: "allow" } }]),
        step({})
      )
      yield* once
      const times: Array<number> = []
      let cpuMicros = 0
      for (let i = 0; i < shape.runs; i++) {
        yield* ready
        const cpu = process.cpuUsage()
        const started = performance.now()
        yield* once
        times.push(performance.now() - started)
        const used = process.cpuUsage(cpu)
        cpuMicros += used.user + used.system
      }
      times.sort((a, b) => a - b)
      rows.push({
        rules: shape.name,
        path: workers.needsWorker(shape.rules, facts.arguments) ? "worker" : "event loop",
        "p50 ms": round(quantile(times, 0.5) * 1000) / 1000,
        "max ms": round(times[times.length - 1]! * 1000) / 1000,
        "CPU µs per call": round(cpuMicros / shape.runs),
        answer: answer.slice(0, 100)
      })
    }
    return {
      rows,
      notes: [
        `SVC_APPROVAL_RULES_TIMEOUT ${config.approvalRules.timeoutMs} ms, SVC_APPROVAL_RULES_HEAP_MB ${config.approvalRules.heapMb}, ${config.approvalRules.workers} workers; workers replaced: ${workers.replacedWorkers()}.`,
        "CPU is this process's (the event loop and the workers together, a replaced worker's start included when it falls in the call), on whatever else the machine runs."
      ]
    }
  })
  return Effect.runPromise(
    Effect.scoped(program).pipe(
      Effect.provide(RuleWorkers.layer.pipe(Layer.provideMerge(SvcConfig.layerWith({ warmStart: false }))))
    )
  )
}
