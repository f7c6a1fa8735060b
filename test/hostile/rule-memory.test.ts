/**
 * Rules that build lists and strings past the rule runners' memory
 * (`SVC_APPROVAL_RULES_HEAP_MB`) in one native step: a `split` of millions
 * of characters, then a `map` over the millions of items. A thread's heap
 * limit cannot end such a step (the whole process aborts); a rule process
 * can. The process under test must keep answering, a dry run be refused
 * naming the limit, and a step be decided by the class's settings.
 */
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { type Answer, type Hostile, startHostile } from "../support/hostile.ts"

/** One step's arguments: a string of a million characters (the body's limit is 1 MiB). */
const ARGS = { s: "a".repeat(1_000_000) }
/**
 * Sixty-four million characters (joined cheaply: V8 keeps a concatenation as a
 * rope), split into as many items in one native step, each mapped to a new
 * string. Run in a thread with a 256 MB heap, it aborted its process; in
 * the server's rule threads (100 ms deadline) termination could not
 * interrupt the split: another organization's p95 1.1 to 1.7 s, the server
 * 626 MB larger.
 */
const CONDITION = "cel.bind(t, arguments.s + arguments.s, cel.bind(u, t + t + t + t, cel.bind(v, u + u + u + u, " +
  "size((v + v).split(\"\").map(x, x + x)) > 0)))"
const GIVE_UP_MS = 30_000
const LIMITS = ["SVC_APPROVAL_RULES_TIMEOUT", "SVC_APPROVAL_RULES_HEAP_MB"]

const settings = { mode: "require_approval", review_seconds: 900, expiring_notice_seconds: 0, timeout_action: "reject" }
const rules = [{ name: "builds-millions", condition: CONDITION, result: { decision: "allow" } }]

const refusedNamingTheLimit = (answer: Answer) => {
  assert.strictEqual(answer.status, 400, answer.text.slice(0, 300))
  assert.strictEqual(answer.json?.code, "POLICY_RULES_TOO_COMPLEX", answer.text.slice(0, 300))
  assert.include(LIMITS, answer.json?.limit)
  assert.strictEqual(answer.json?.field, "rules[0].condition")
  assert.include(answer.json?.detail, "builds-millions")
}

describe("rules that build past the rule runners' memory in one step", () => {
  let hostile: Hostile
  beforeAll(async () => {
    hostile = await startHostile()
  })
  afterAll(() => hostile?.stop())

  it("a dry run is refused naming the limit, and the process keeps serving", async () => {
    let answers: Array<Answer> = []
    const figures = await hostile.measure("dry run, split then map over 64 million items x3", async () => {
      for (let i = 0; i < 3; i++) {
        answers.push(
          await hostile.call(hostile.attacker, "POST", "/v1/approval-policies/build.dry/dry-run", {
            tool: "t",
            arguments: ARGS,
            policy: { ...settings, rules }
          }, { timeoutMs: GIVE_UP_MS })
        )
      }
    })
    answers.forEach(refusedNamingTheLimit)
    assert.deepStrictEqual(figures.failures, [])
  })

  it("a stored rule: each step is decided by the class's settings, a dry run names the rule", async () => {
    const put = await hostile.call(hostile.attacker, "PUT", "/v1/approval-policies/build.stored", {
      ...settings,
      rules
    })
    assert.strictEqual(put.status, 200, put.text)
    const created = await hostile.call(hostile.attacker, "POST", "/v1/agent-sessions", {})
    assert.strictEqual(created.status, 201, created.text)
    const steps: Array<Answer> = []
    const figures = await hostile.measure("stored rule, split then map over 64 million items x3 steps", async () => {
      for (let i = 0; i < 3; i++) {
        steps.push(
          await hostile.call(hostile.attacker, "POST", `/v1/agent-sessions/${created.json.id}/steps`, {
            step_id: `build-${i}`,
            tool: "t",
            action_class: "build.stored",
            arguments: ARGS
          }, { timeoutMs: GIVE_UP_MS })
        )
      }
    })
    for (const step of steps) {
      // The class's mode (require_approval) decides: a person does.
      assert.strictEqual(step.status, 200, step.text.slice(0, 300))
      assert.strictEqual(step.json?.decision, "pending", step.text.slice(0, 300))
      assert.isNotOk(step.json?.rule, step.text.slice(0, 300))
    }
    // The stored policy's dry run names the rule that failed and the limit.
    const dry = await hostile.call(hostile.attacker, "POST", "/v1/approval-policies/build.stored/dry-run", {
      tool: "t",
      arguments: ARGS
    }, { timeoutMs: GIVE_UP_MS })
    refusedNamingTheLimit(dry)
    assert.deepStrictEqual(figures.failures, [])
  })
})
