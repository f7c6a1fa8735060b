import { assert, describe, it } from "vitest"
import { DraftError, draftOf, move, payloadOf, placeOf } from "../../../console/src/screens/policy-draft.ts"

const stored = {
  action_class: "payments.refund",
  mode: "require_approval" as const,
  review_seconds: 900,
  expiring_notice_seconds: 300,
  escalation_seconds: 3600,
  timeout_action: "reject" as const,
  group: "payments",
  escalation_chain: ["finance", "cfo"],
  rules: [
    { name: "small", condition: "arguments.amount <= 100.0", result: { decision: "allow" as const } },
    {
      name: "huge",
      condition: "arguments.amount > 5000.0",
      result: { decision: "reject" as const, reason: "Finance decides." }
    },
    {
      name: "eur",
      condition: "arguments.currency == \"EUR\"",
      result: {
        decision: "require_approval" as const,
        review_seconds: 300,
        expiring_notice_seconds: 60,
        timeout_action: "allow" as const,
        quorum: 2,
        group: "treasury"
      }
    }
  ],
  arguments_schema: { type: "object" },
  updated_at: "2026-11-26T00:00:00.000Z"
}

describe("the Policies screen's draft of a policy", () => {
  it("a stored policy, edited as text and sent back, is the same policy", () => {
    const { action_class: _, updated_at: __, ...input } = stored
    assert.deepStrictEqual(payloadOf(draftOf(stored)), input)
  })

  it("empty escalation, quorum and groups are left out; an arguments schema that is not JSON names its field", () => {
    const draft = {
      ...draftOf(stored),
      deadlines: {
        review: "60",
        notice: "0",
        escalation: " ",
        timeout: "allow" as const,
        quorum: "",
        group: "",
        escalationChain: " , "
      },
      schema: ""
    }
    const payload = payloadOf(draft)
    assert.deepStrictEqual([
      payload.review_seconds,
      payload.expiring_notice_seconds,
      "escalation_seconds" in payload,
      "quorum" in payload,
      "group" in payload,
      "escalation_chain" in payload,
      "arguments_schema" in payload
    ], [60, 0, false, false, false, false, false])
    assert.throws(() => payloadOf({ ...draft, schema: "{type:" }), DraftError)
  })

  it("the escalation chain is typed as group names separated by commas, in order; blanks around them are dropped", () => {
    const draft = draftOf(stored)
    assert.strictEqual(draft.deadlines.escalationChain, "finance, cfo")
    const payload = payloadOf({
      ...draft,
      deadlines: { ...draft.deadlines, escalationChain: " finance ,cfo,, board " }
    })
    assert.deepStrictEqual(payload.escalation_chain, ["finance", "cfo", "board"])
  })

  it("a problem's field goes to the rule or the schema it names", () => {
    assert.deepStrictEqual(placeOf("rules[2].condition"), { rule: 2 })
    assert.deepStrictEqual(placeOf("rules[0].result.reason"), { rule: 0 })
    assert.deepStrictEqual(placeOf("arguments_schema"), { schema: true })
    assert.isUndefined(placeOf("review_seconds"))
    assert.isUndefined(placeOf(undefined))
  })

  it("rules move within bounds", () => {
    assert.deepStrictEqual(move(["a", "b", "c"], 2, -1), ["a", "c", "b"])
    assert.deepStrictEqual(move(["a", "b", "c"], 0, -1), ["a", "b", "c"])
    assert.deepStrictEqual(move(["a", "b", "c"], 2, 1), ["a", "b", "c"])
  })
})
