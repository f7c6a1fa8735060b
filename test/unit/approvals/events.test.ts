import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as fc from "fast-check"
import { ApprovalEventTypes } from "../../../src/api/Approvals.ts"
import { ApprovalEvent } from "../../../src/api/Events.ts"
import { argumentsDigest } from "../../../src/approvals/ArgumentsDiff.ts"
import { NOTHING_SETTLED } from "../../../src/approvals/Edits.ts"
import { makeApprovalEvent, snapshotOf } from "../../../src/approvals/Events.ts"
import { approvalEventBody } from "../../../src/outbox/Outbox.ts"

const uuid = fc.uuid({ version: 7 })
const instant = fc.integer({ min: Date.UTC(2020, 0, 1), max: Date.UTC(2040, 0, 1) }).map((ms) => new Date(ms))

const rows = fc.record({
  id: uuid,
  org_id: uuid,
  session_id: uuid,
  step_id: fc.string({ minLength: 1, maxLength: 40 }),
  task_id: fc.option(uuid, { nil: null }),
  status: fc.constantFrom("pending" as const, "approved" as const, "rejected" as const, "expired" as const),
  deadline_at: instant,
  expires_at: instant,
  timeout_action: fc.constantFrom("allow" as const, "reject" as const),
  rule: fc.option(fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/), { nil: null }),
  decided: fc.option(
    fc.record({
      at: instant,
      by: uuid,
      reason: fc.option(fc.string({ maxLength: 1000 }), { nil: null }),
      // The person behind the decider, and whom the decision counted for (null: a decision recorded before either was).
      person: fc.option(fc.constantFrom("self", "console:ana"), { nil: null }),
      counted: fc.constantFrom("self", "console:ben")
    }),
    { nil: null }
  ),
  quorum: fc.integer({ min: 1, max: 10 }),
  assigned: fc.option(
    fc.record({ group: fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/), level: fc.integer({ min: 0, max: 1 }) }),
    { nil: null }
  ),
  votes: fc.array(
    fc.record({
      decided_by: uuid,
      decision: fc.constantFrom("approve" as const, "reject" as const),
      decided_at: instant.map((at) => at.toISOString()),
      reason: fc.option(fc.string({ maxLength: 100 }), { nil: null })
    }),
    { maxLength: 10 }
  ),
  edit: fc.option(
    fc.oneof(
      fc.record({
        edited: fc.dictionary(
          fc.stringMatching(/^[a-z]{1,6}$/),
          fc.oneof(fc.integer(), fc.boolean(), fc.stringMatching(/^[a-z ]{0,10}$/)) as fc.Arbitrary<Schema.Json>
        )
      }),
      fc.record({ response: fc.stringMatching(/^[a-z ]{1,40}$/) })
    ),
    { nil: null }
  )
}).map(({ assigned, decided, edit, votes, ...row }) => ({
  ...row,
  assigned_group: assigned?.group ?? null,
  escalation_level: assigned?.level ?? 0,
  votes: row.quorum > 1 ? JSON.stringify(votes) : null,
  decided_at: decided?.at ?? null,
  decided_by: decided?.by ?? null,
  decider: decided?.person == null ? null : JSON.stringify({
    person: decided.person === "self" ? decided.by : decided.person,
    decided_for: decided.counted === "self"
      ? (decided.person === "self" ? decided.by : decided.person)
      : decided.counted
  }),
  decision_reason: decided?.reason ?? null,
  ...NOTHING_SETTLED,
  ...(edit !== null && "edited" in edit
    ? {
      approved_arguments: edit.edited,
      arguments_changed: ["/amount"],
      arguments_digest: argumentsDigest(edit.edited)
    }
    : {}),
  ...(edit !== null && "response" in edit ? { response: edit.response } : {})
}))

/** The members naming who a decision stands for: the person behind the decider, and the person it counted for, each where it differs. */
const deciderKeys = (row: { readonly decided_by: string | null; readonly decider: string | null }) => {
  if (row.decider === null) return []
  const { decided_for, person } = JSON.parse(row.decider) as { person: string; decided_for: string }
  return [
    ...(person === row.decided_by ? [] : ["decided_by_person"]),
    ...(decided_for === person ? [] : ["decided_for"])
  ]
}

describe("the webhook event body", () => {
  it("has a fixed key order, decodes as ApprovalEvent, and carries decided_at/decided_by only for a person's decision (decided_by_person and decided_for only where they differ from the decider), decision_reason only when given, rule only when a rule required it, quorum and votes only when more than one must approve, assigned_group and escalation_level only when a reviewer group reviews it, an edit's or an answer's members only when given", () => {
    fc.assert(fc.property(rows, fc.constantFrom(...ApprovalEventTypes), instant, (row, type, at) => {
      const event = makeApprovalEvent(type, row.org_id, snapshotOf(row), at)
      const body = approvalEventBody(event)
      const parsed = JSON.parse(body)
      assert.deepStrictEqual(Object.keys(parsed), ["id", "type", "org_id", "occurred_at", "approval"])
      const keys = [
        "approval_id",
        "session_id",
        "step_id",
        "task_id",
        "status",
        "deadline_at",
        "expires_at",
        "timeout_action",
        ...(row.rule === null ? [] : ["rule"])
      ]
      const quorumKeys = row.quorum === 1
        ? []
        : row.status === "pending"
        ? ["quorum", "votes", "approvals_remaining"]
        : ["quorum", "votes"]
      const edits = [
        ...(row.approved_arguments === null ? [] : ["approved_arguments", "arguments_changed", "arguments_digest"]),
        ...(row.response === null ? [] : ["response"])
      ]
      assert.deepStrictEqual(
        Object.keys(parsed.approval),
        [
          ...(row.decided_at === null ? keys : [
            ...keys,
            "decided_at",
            "decided_by",
            ...deciderKeys(row),
            ...(row.decision_reason === null ? [] : ["decision_reason"])
          ]),
          ...quorumKeys,
          ...(row.assigned_group === null ? [] : ["assigned_group", "escalation_level"]),
          ...edits
        ]
      )
      if (row.quorum > 1) {
        const votes = JSON.parse(row.votes!) as Array<{ reason: string | null }>
        assert.deepStrictEqual(
          parsed.approval.votes,
          votes.map(({ reason, ...vote }) => reason === null ? vote : { ...vote, reason })
        )
      }
      if (row.decided_at !== null && row.decision_reason !== null) {
        assert.strictEqual(parsed.approval.decision_reason, row.decision_reason)
      }
      assert.deepStrictEqual(Schema.decodeUnknownSync(ApprovalEvent)(parsed), event)
      // Built again from the decoded event: the same bytes (retries and replays send identical bodies).
      assert.strictEqual(approvalEventBody(Schema.decodeUnknownSync(ApprovalEvent)(parsed)), body)
    }))
  })

  it("each event gets its own id", () => {
    const row = {
      id: "0193a4b0-0000-7000-8000-000000000001",
      org_id: "0193a4b0-0000-7000-8000-000000000002",
      session_id: "0193a4b0-0000-7000-8000-000000000003",
      step_id: "s",
      task_id: null,
      status: "pending" as const,
      deadline_at: new Date(0),
      expires_at: new Date(0),
      timeout_action: "reject" as const,
      decided_at: null,
      decided_by: null,
      decision_reason: null,
      rule: null,
      quorum: 1,
      votes: null,
      decider: null,
      assigned_group: null,
      escalation_level: 0,
      ...NOTHING_SETTLED
    }
    const a = makeApprovalEvent("approval.requested", row.org_id, snapshotOf(row), new Date())
    const b = makeApprovalEvent("approval.requested", row.org_id, snapshotOf(row), new Date())
    assert.notStrictEqual(a.id, b.id)
  })
})
