/**
 * The rule workers: a policy's rules run within one deadline
 * (`SVC_APPROVAL_RULES_TIMEOUT`) and a heap (`SVC_APPROVAL_RULES_HEAP_MB`)
 * enforced while they run, whatever they build; the event loop stays free
 * meanwhile; rules proved cheap run on the event loop with the same answer.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Fiber, Layer } from "effect"
import { BENCH_RULES } from "../../../bench/scenarios/steps.ts"
import type { PolicyRule } from "../../../src/api/Policies.ts"
import { scrubResponse } from "../../../src/approvals/Reasons.ts"
import { compileRules, type RuleLimits } from "../../../src/approvals/Rules.ts"
import { RuleWorkers } from "../../../src/approvals/RuleWorkers.ts"
import { SvcConfig, svcConfig } from "../../../src/platform/Config.ts"
import { hostileRules } from "../../support/hostileRules.ts"

const limits: RuleLimits = { maxRules: 50, maxLength: 2000, maxNodes: 200, maxDepth: 12 }
/** The largest deadline allowed: an answer that did not wait for another organization's rules is told apart from one that did. */
const TIMEOUT_MS = 1000
/** The default: a rule process past it ends, and this process goes on (RuleWorkers.ts). */
const HEAP_MB = 256

const compiled = (rules: ReadonlyArray<PolicyRule>) => {
  const result = compileRules(rules, limits)
  if (!result.ok) throw new Error(`${result.problem.field}: ${result.problem.detail}`)
  return result.rules
}

const facts = (args: unknown) => ({
  tool: "shell",
  arguments: args,
  session: { id: "00000000-0000-4000-8000-000000000000" }
})

/** The longest the event loop went without running a 5 ms timer while `effect` ran. */
const loopLag = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    let last = performance.now()
    let worst = 0
    const timer = setInterval(() => {
      const now = performance.now()
      worst = Math.max(worst, now - last)
      last = now
    }, 5)
    const result = yield* Effect.ensuring(effect, Effect.sync(() => clearInterval(timer)))
    return { result, worstGapMs: worst }
  })

const Workers = RuleWorkers.layer.pipe(
  Layer.provideMerge(Layer.effect(
    SvcConfig,
    Effect.map(
      svcConfig,
      (c) => ({ ...c, warmStart: false, approvalRules: { ...c.approvalRules, timeoutMs: TIMEOUT_MS, heapMb: HEAP_MB } })
    )
  ))
)

layer(Workers, { excludeTestServices: true })("rule workers", (it) => {
  describe("the budget is enforced while the rules run", () => {
    it.effect.each(hostileRules().map((hostile) => [hostile.name, hostile] as const))(
      "%s: ends at the deadline or the heap, naming the setting and the rule, the event loop free meanwhile",
      ([, hostile]) =>
        Effect.gen(function*() {
          const workers = yield* RuleWorkers
          const rules = compiled([
            { name: "cheap", condition: "tool == 'never'", result: { decision: "allow" } },
            hostile.rule
          ])
          assert.isTrue(workers.needsWorker(rules, hostile.arguments))
          // A worker ready (one replaced by the previous case may still be starting): the time measured is the rules'.
          yield* workers.run(
            "org-a",
            compiled([{ name: "warm", condition: "[1].exists(x, x == 2)", result: { decision: "allow" } }]),
            facts({})
          )
          const started = performance.now()
          const { result, worstGapMs } = yield* loopLag(
            Effect.flip(workers.run("org-a", rules, facts(hostile.arguments)))
          )
          const took = performance.now() - started
          assert.strictEqual(result._tag, "OverBudget")
          if (result._tag !== "OverBudget") return
          assert.include(["SVC_APPROVAL_RULES_TIMEOUT", "SVC_APPROVAL_RULES_HEAP_MB"], result.limit)
          // The rule that was running is named: the second one.
          assert.strictEqual(result.rule, 1)
          // The deadline, plus the arguments' copy to the worker and a shared machine's scheduling.
          // Unbounded, these hold the thread for 9 s to forever; the slack is a 2-core machine shared by
          // several test runs (load average up to 45), whose scheduling alone delays a timer by hundreds of ms.
          assert.isBelow(took, TIMEOUT_MS + 3000, `took ${took} ms`)
          assert.isBelow(worstGapMs, 1000, `the event loop stalled ${worstGapMs} ms`)
        }),
      30_000
    )

    it.effect(
      "a rule that builds past the heap in one native step ends its own process, and is named",
      () =>
        Effect.gen(function*() {
          const workers = yield* RuleWorkers
          // Sixty-four million characters (a rope: cheap to join), split in one native step, then mapped.
          const condition =
            "cel.bind(t, arguments.s + arguments.s, cel.bind(u, t + t + t + t, cel.bind(v, u + u + u + u, " +
            "size((v + v).split(\"\").map(x, x + x)) > 0)))"
          const rules = compiled([{ name: "cheap", condition: "tool == 'never'", result: { decision: "allow" } }, {
            name: "builds",
            condition,
            result: { decision: "allow" }
          }])
          const replaced = workers.replacedWorkers()
          const over = yield* Effect.flip(workers.run("org-a", rules, facts({ s: "a".repeat(1_000_000) })))
          assert.strictEqual(over._tag, "OverBudget")
          if (over._tag !== "OverBudget") return
          assert.include(["SVC_APPROVAL_RULES_TIMEOUT", "SVC_APPROVAL_RULES_HEAP_MB"], over.limit)
          assert.strictEqual(over.rule, 1)
          assert.isAbove(workers.replacedWorkers(), replaced)
          // The pool goes on with a new process.
          const verdict = yield* workers.run(
            "org-a",
            compiled([{ name: "after", condition: "[1].exists(x, x == 1)", result: { decision: "allow" } }]),
            facts({})
          )
          assert.strictEqual(verdict.rule, "after")
        }),
      60_000
    )

    it.effect(
      "another organization's rules are answered while one organization's run to their deadline",
      () =>
        Effect.gen(function*() {
          const workers = yield* RuleWorkers
          const [hostile] = hostileRules()
          const slow = compiled([hostile!.rule])
          const cheap = compiled(BENCH_RULES as ReadonlyArray<PolicyRule>)
          const heavy = { command: "ls", cwd: "/srv", note: "x".repeat(64 * 1024) }
          // Both workers ready (a server starts them with it; an earlier case may have replaced one).
          yield* workers.warm
          const fiber = yield* Effect.forkChild(Effect.flip(workers.run("org-a", slow, facts(hostile!.arguments))))
          yield* Effect.sleep("10 millis")
          const started = performance.now()
          const verdict = yield* workers.run("org-b", cheap, facts(heavy))
          const took = performance.now() - started
          assert.strictEqual(verdict.rule, "shell-srv")
          // Its answer does not wait for the other's deadline.
          assert.isBelow(took, TIMEOUT_MS, `org-b waited ${took} ms`)
          yield* Fiber.await(fiber)
        }),
      30_000
    )
  })

  describe("a policy's rules are checked in a worker when stored", () => {
    it.effect(
      "the worker finds the problem compiling them here finds, and none in good rules",
      () =>
        Effect.gen(function*() {
          const workers = yield* RuleWorkers
          const config = yield* SvcConfig
          const good: ReadonlyArray<PolicyRule> = BENCH_RULES as ReadonlyArray<PolicyRule>
          assert.isNull(yield* workers.check("org-a", good))
          const cases: ReadonlyArray<ReadonlyArray<PolicyRule>> = [
            [...good, { name: "typo", condition: "tool ==", result: { decision: "allow" } }],
            [{ name: "regex", condition: "tool.matches('a+')", result: { decision: "allow" } }],
            [{ name: "int", condition: "size(tool)", result: { decision: "allow" } }],
            [{ name: "long", condition: `tool == '${"x".repeat(3000)}'`, result: { decision: "allow" } }]
          ]
          for (const rules of cases) {
            const here = compileRules(rules, config.approvalRules)
            assert.isFalse(here.ok)
            assert.deepStrictEqual(yield* workers.check("org-a", rules), here.ok ? null : here.problem)
          }
        }),
      30_000
    )
  })

  describe("a decision's response is scrubbed in a worker", () => {
    it.effect("secrets leave it as they would on the event loop, nothing else changes", () =>
      Effect.gen(function*() {
        const workers = yield* RuleWorkers
        const key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
        const response = {
          message: `use AWS_SECRET_ACCESS_KEY=${key} then retry`,
          steps: ["ls", { token: "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB" }],
          count: 3
        }
        const scrubbed = yield* workers.scrub("org-a", response)
        assert.deepStrictEqual(scrubbed, yield* scrubResponse(response))
        assert.notInclude(JSON.stringify(scrubbed), key)
        assert.include(JSON.stringify(scrubbed), "[REDACTED]")
        assert.deepStrictEqual(yield* workers.scrub("org-a", "nothing secret here"), "nothing secret here")
      }), 30_000)
  })

  describe("rules proved cheap run on the event loop", () => {
    it.effect("the steps benchmark's ten rules on a small step need no worker, and answer as a worker does", () =>
      Effect.gen(function*() {
        const workers = yield* RuleWorkers
        const rules = compiled(BENCH_RULES as ReadonlyArray<PolicyRule>)
        const small = { command: "ls -la /srv/app", cwd: "/srv" }
        assert.isFalse(workers.needsWorker(rules, small))
        const heavy = { ...small, note: "x".repeat(64 * 1024) }
        assert.isTrue(workers.needsWorker(rules, heavy))
        assert.deepStrictEqual(
          yield* workers.run("org-a", rules, facts(small)),
          yield* workers.run("org-a", rules, facts(heavy))
        )
        const sudo = { command: "sudo ls", cwd: "/tmp" }
        assert.strictEqual((yield* workers.run("org-a", rules, facts(sudo))).rule, "shell-sudo")
      }))

    it.effect("a rule that fails in a worker ends the walk, as on the event loop", () =>
      Effect.gen(function*() {
        const workers = yield* RuleWorkers
        const rules = compiled([{
          name: "amount",
          condition: "arguments.l.exists(x, x > 1.0) || arguments.amount > 1.0",
          result: { decision: "allow" }
        }])
        const verdict = yield* workers.run("org-a", rules, facts({ l: [0] }))
        assert.deepStrictEqual([verdict.rule, verdict.rule === null ? verdict.error?.rule : undefined], [
          null,
          "amount"
        ])
      }))
  })
})
