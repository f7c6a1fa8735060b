/**
 * Approval rules (policy writes, dry runs, stored rules on steps) and
 * decisions (edits, responses, reasons) at the largest and most expensive
 * the limits allow (`SVC_APPROVAL_RULE*`, an edit's 262 144 characters, a
 * response's 65 536, a reason's 1 000), while another organization's requests are timed
 * (test/support/hostile.ts).
 */
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { type Answer, type Hostile, inParallel, startHostile } from "../support/hostile.ts"

const MAX_BODY = 1_048_576
/** Edited `arguments` (as compact JSON) and a `response` (docs/approvals.md, "Bounds of an edit"). */
const MAX_EDIT = 262_144
const MAX_RESPONSE = 65_536
const MAX_CONDITION = 2_000
const MAX_RULES = 50
/** How long one attacking request may take before the case gives up on it (a frozen process never answers). */
const GIVE_UP_MS = 15_000

/**
 * No answer may be a 5xx or a dropped connection, and no input may be
 * refused for its shape (a 400 without `limit`): the case would then test
 * nothing. A 4xx naming a limit is a bound doing its work.
 */
const refusedOrServed = (answers: ReadonlyArray<Answer>) => {
  const bad = answers.filter((answer) =>
    answer.status === 0 || answer.status >= 500 || (answer.status === 400 && answer.json?.limit === undefined)
  )
  assert.deepStrictEqual(bad.map((answer) => `${answer.status} ${answer.text.slice(0, 300)}`), [])
}

const passes = (figures: { readonly failures: ReadonlyArray<string> }) => assert.deepStrictEqual(figures.failures, [])

const settings = { mode: "require_approval", review_seconds: 900, expiring_notice_seconds: 0, timeout_action: "reject" }

/** The longest string literal that leaves `room` characters of a condition for the rest. */
const literal = (room: number, parts: number) => "x".repeat(Math.floor((MAX_CONDITION - room) / parts))

/** `terms` joined by `op` as a balanced tree: many nodes, little depth (`SVC_APPROVAL_RULE_MAX_DEPTH`). */
const balanced = (terms: ReadonlyArray<string>, op: string): string =>
  terms.length === 1
    ? terms[0]!
    : `(${balanced(terms.slice(0, terms.length >> 1), op)} ${op} ${balanced(terms.slice(terms.length >> 1), op)})`

/** Checks that a condition is within the length limit. */
const fits = (condition: string) => {
  assert.isAtMost(condition.length, MAX_CONDITION, condition.slice(0, 80))
  return condition
}

describe("approval rules and decisions at the limits", () => {
  let hostile: Hostile
  let session: string
  let steps = 0
  beforeAll(async () => {
    hostile = await startHostile()
    const created = await hostile.call(hostile.attacker, "POST", "/v1/agent-sessions", {})
    assert.strictEqual(created.status, 201, created.text)
    session = created.json.id
  })
  afterAll(() => hostile?.stop())

  const put = (actionClass: string, policy: unknown) =>
    hostile.call(hostile.attacker, "PUT", `/v1/approval-policies/${actionClass}`, policy, { timeoutMs: GIVE_UP_MS })
  const step = (actionClass: string, args: unknown, raw?: string) => {
    const stepId = `s${steps++}`
    return hostile.call(hostile.attacker, "POST", `/v1/agent-sessions/${session}/steps`, undefined, {
      raw: raw ?? JSON.stringify({ step_id: stepId, tool: "t", action_class: actionClass, arguments: args }),
      timeoutMs: GIVE_UP_MS
    })
  }
  const dryRun = (condition: string, args: unknown = {}) =>
    hostile.call(hostile.attacker, "POST", "/v1/approval-policies/dry.run/dry-run", {
      tool: "t",
      arguments: args,
      policy: { ...settings, rules: [{ name: "r", condition: fits(condition), result: { decision: "allow" } }] }
    }, { timeoutMs: GIVE_UP_MS })

  describe("rules", () => {
    it("policy writes: 50 rules of 2 000 characters at the node and depth limits, 16 writes, 8 at a time", async () => {
      const rule = (i: number) => {
        // About 200 nodes in a balanced tree, padded with a string literal to the length limit.
        const terms = Array.from({ length: 96 }, (_, n) => (n === 0 ? `arguments.a${i}` : `${n}.0`))
        const condition = `${balanced(terms, "+")} > 0.0 && "" != "`
        return {
          name: `r${i}`,
          condition: `${condition}${"p".repeat(MAX_CONDITION - condition.length - 1)}"`,
          result: { decision: "allow" }
        }
      }
      const policy = { ...settings, rules: Array.from({ length: MAX_RULES }, (_, i) => rule(i)) }
      const first = await put("write.c", policy)
      assert.strictEqual(first.status, 200, first.text)
      let answers: Array<Answer> = []
      const figures = await hostile.measure("policy writes, 50 rules at the limits x16", async () => {
        answers = await inParallel(16, 8, (i) => put(`write.c${i}`, policy))
      })
      refusedOrServed(answers)
      passes(figures)
    })

    it("stored rules: 50 rules each at its cost budget, 16 steps, 8 at a time", async () => {
      // Nodes times (n + 1) at the budget (5 000): about 200 nodes over a list of 24.
      const body = balanced(Array.from({ length: 96 }, (_, n) => (n === 0 ? "x" : `${n}.0`)), "+")
      const rules = Array.from({ length: MAX_RULES }, (_, i) => ({
        name: `b${i}`,
        condition: `arguments.l.exists(x, ${body} < 0.0)`,
        result: { decision: "allow" }
      }))
      const put50 = await put("budget.each", { ...settings, rules })
      assert.strictEqual(put50.status, 200, put50.text)
      const args = { l: Array.from({ length: 24 }, (_, i) => i) }
      let answers: Array<Answer> = []
      const figures = await hostile.measure("stored rules, 50 at the cost budget x16 steps", async () => {
        answers = await inParallel(16, 8, () => step("budget.each", args))
      })
      refusedOrServed(answers)
      passes(figures)
    })

    it("a stored rule over split lists with a 1 MiB step: recipients.split exists blocked.split exists", async () => {
      const put1 = await put("mail.send", {
        ...settings,
        rules: [{
          name: "blocked",
          condition: "arguments.recipients.split(\",\").exists(r, arguments.blocked.split(\",\").exists(b, r == b))",
          result: { decision: "reject", reason: "blocked recipient" }
        }]
      })
      assert.strictEqual(put1.status, 200, put1.text)
      const half = Math.floor((MAX_BODY - 200) / 2)
      const list = (prefix: string) =>
        Array.from({ length: Math.floor(half / 8) }, (_, i) => `${prefix}${i}`).join(",").slice(0, half)
      const raw = JSON.stringify({
        step_id: "split-1",
        tool: "t",
        action_class: "mail.send",
        arguments: { recipients: list("r"), blocked: list("b") }
      })
      assert.isAtMost(raw.length, MAX_BODY)
      let answer: Answer | undefined
      const figures = await hostile.measure("stored rule over split lists, 1 MiB step", async () => {
        answer = await step("mail.send", undefined, raw)
      })
      refusedOrServed([answer!])
      passes(figures)
    })

    it("a stored rule doing string work in a comprehension: l.exists(x, size(s.split(\"\")) == 0) with a 1 MiB step", async () => {
      const put1 = await put("text.scan", {
        ...settings,
        rules: [{
          name: "scan",
          condition: "arguments.l.exists(x, size(arguments.s.split(\"\")) == 0)",
          result: { decision: "allow" }
        }]
      })
      assert.strictEqual(put1.status, 200, put1.text)
      // A list as long as the cost estimate lets through (about 11 nodes times 401); each item
      // splits the rest of the body into single characters.
      const args = { l: Array.from({ length: 400 }, () => 0), s: "" }
      args.s = "a".repeat(MAX_BODY - JSON.stringify(args).length - 200)
      let answer: Answer | undefined
      const figures = await hostile.measure("stored rule with string work, 1 MiB step", async () => {
        answer = await step("text.scan", args)
      })
      refusedOrServed([answer!])
      passes(figures)
    })

    it("a dry run of three nested exists over split literals", async () => {
      const s = literal(120, 3)
      const condition =
        `"${s}".split("").exists(a, "${s}".split("").exists(b, "${s}".split("").exists(c, a + b + c == "zzz")))`
      let answer: Answer | undefined
      const figures = await hostile.measure("dry run, nested exists over split", async () => {
        answer = await dryRun(condition)
      })
      refusedOrServed([answer!])
      passes(figures)
    })

    it("a dry run of three nested map over split literals", async () => {
      const s = literal(120, 3)
      const condition = `size("${s}".split("").map(a, "${s}".split("").map(b, "${s}".split("").map(c, a + b + c)))) > 0`
      let answer: Answer | undefined
      const figures = await hostile.measure("dry run, nested map over split", async () => {
        answer = await dryRun(condition)
      })
      refusedOrServed([answer!])
      passes(figures)
    })

    it("a dry run of a four-deep cel.bind that grows its list fourfold at each level, then searches it for each item", async () => {
      // Within the depth limit: 1 700 items become 108 800, and `in` scans them all for every one.
      const s = literal(300, 1)
      const condition = `cel.bind(a, "${s}".split(""), cel.bind(b, a + a + a + a, cel.bind(c, b + b + b + b, ` +
        `cel.bind(d, c + c + c + c, d.exists(x, x + "q" in d)))))`
      let answer: Answer | undefined
      const figures = await hostile.measure("dry run, four-deep cel.bind", async () => {
        answer = await dryRun(condition)
      })
      refusedOrServed([answer!])
      passes(figures)
    })
  })

  describe("decisions", () => {
    /** `count` pending approvals of `actionClass` (with an arguments schema that takes any object) on `args`. */
    const pending = async (actionClass: string, count: number, args: unknown) => {
      const policy = await put(actionClass, { ...settings, arguments_schema: { type: "object" } })
      assert.strictEqual(policy.status, 200, policy.text)
      const ids: Array<string> = []
      for (let i = 0; i < count; i++) {
        const answer = await step(actionClass, args)
        assert.strictEqual(answer.json?.decision, "pending", answer.text)
        ids.push(answer.json.approval_id)
      }
      return ids
    }
    const decide = (id: string, raw: string) =>
      hostile.call(hostile.attacker, "POST", `/v1/agent-approvals/${id}/decision`, undefined, {
        raw,
        timeoutMs: GIVE_UP_MS
      })

    // Four edits of 256 KiB at once once held another organization's read
    // 1.7 s on the embedded database: each decision wrote the edit five
    // times in its transaction (the approval, the step, three events) and
    // read it back twice, in the embedded database's one session. An organization's
    // decisions with edits now write one at a time, the edit is parsed by
    // the database once (the step copies it) and made into JSON text once,
    // before the transaction (the events splice it in).
    it("approve with edits: the largest edit allowed, deep paths where every leaf changed, 4 approvals", async () => {
      // 50 levels of 100-character names, then as many one-digit members as fit: every one is a change.
      const names = Array.from({ length: 50 }, (_, i) => `${i}`.padEnd(100, "n"))
      const wrap = (inner: string) => names.reduceRight((acc, name) => `{"${name}":${acc}}`, inner)
      const ids = await pending("edit.deep", 4, JSON.parse(wrap("{}")))
      const members: Array<string> = []
      let size = wrap("{}").length
      for (let i = 0;; i++) {
        const member = `"${i}":1`
        if (size + member.length + 1 > MAX_EDIT) break
        members.push(member)
        size += member.length + 1
      }
      const raw = `{"decision":"approve","arguments":${wrap(`{${members.join(",")}}`)}}`
      let answers: Array<Answer> = []
      const figures = await hostile.measure("approve with edits, 256 KiB x4", async () => {
        answers = await inParallel(ids.length, 4, (i) => decide(ids[i]!, raw))
      })
      refusedOrServed(answers)
      passes(figures)
    })

    it("answer instead: the largest response allowed, of secret-shaped text, 8 approvals", async () => {
      const ids = await pending("answer.big", 8, {})
      const text = Array.from(
        { length: 30_000 },
        (_, i) =>
          i % 2 === 0
            ? `AWS_SECRET_ACCESS_KEY=${"wJalrXUtnFEMI/K7MDENG".padEnd(40, `${i % 10}`)}`
            : `password=${"s3cr3t".repeat(4)}${i}`
      ).join(" ")
      const raw = `{"decision":"reject","response":${JSON.stringify(text.slice(0, MAX_RESPONSE - 2))}}`
      let answers: Array<Answer> = []
      const figures = await hostile.measure("answer instead, 64 KiB response x8", async () => {
        answers = await inParallel(ids.length, 8, (i) => decide(ids[i]!, raw))
      })
      refusedOrServed(answers)
      passes(figures)
    })

    it("reasons: 1 000 characters of secret-shaped text on 32 decisions", async () => {
      const ids = await pending("reason.long", 32, {})
      const reason = Array.from({ length: 40 }, (_, i) => `token=${"Zx9".repeat(6)}${i}`).join(" ").slice(0, 1000)
      const raw = JSON.stringify({ decision: "reject", reason })
      let answers: Array<Answer> = []
      const figures = await hostile.measure("reasons, 1 000 characters x32", async () => {
        answers = await inParallel(ids.length, 8, (i) => decide(ids[i]!, raw))
      })
      refusedOrServed(answers)
      passes(figures)
    })
  })
})
