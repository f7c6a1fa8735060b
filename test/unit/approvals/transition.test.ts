import { assert, describe, it } from "@effect/vitest"
import { type DeadlineState, plan, type PolicyRule } from "../../../src/approvals/Deadlines.ts"
import {
  type CastVote,
  type Current,
  type Decision,
  Outcome,
  type PendingFacts,
  transition
} from "../../../src/approvals/Transition.ts"

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0)
const RULE: PolicyRule = {
  mode: "require_approval",
  review_seconds: 900,
  expiring_notice_seconds: 300,
  escalation_seconds: null,
  timeout_action: "reject"
}

const approve: Decision = { decision: "approve", editsArguments: false }
const reject: Decision = { decision: "reject", editsArguments: false }
const approveEdited: Decision = { decision: "approve", editsArguments: true }

const pending = (facts: Partial<PendingFacts> = {}): PendingFacts => ({
  status: "pending",
  quorum: 1,
  assignedGroup: null,
  deadlines: plan(RULE, T0),
  votes: [],
  ...facts
})

/** Alice decides for herself, her precondition holding, a minute after the request. */
const current = (approval: PendingFacts | undefined, rest: Partial<Omit<Current, "approval">> = {}): Current => ({
  approval,
  guard: true,
  standing: { person: "console:alice", decidedFor: "console:alice" },
  ...rest
})
const NOW = T0 + 60_000

const vote = (by: string, decision: "approve" | "reject" = "approve", forWhom: string = by): CastVote => ({
  decided_by: by,
  person: by,
  decided_for: forWhom,
  decision
})

const alice = { actor: "console:alice", person: "console:alice", decidedFor: "console:alice" }

describe("a decision's transition (no database)", () => {
  describe("refusals, in their order", () => {
    it("no approval: Missing; a closed one: Closed with its status, whatever else holds", () => {
      assert.deepStrictEqual(transition(current(undefined), "console:alice", approve, NOW), Outcome.Missing())
      for (const status of ["approved", "rejected", "expired"] as const) {
        const closed = current(pending({ status }), { guard: false, standing: { person: null, decidedFor: null } })
        assert.deepStrictEqual(transition(closed, "console:alice", approve, NOW), Outcome.Closed({ status }))
      }
    })

    it("the decider's precondition comes before who they are; a revoked key before the group", () => {
      const refused = current(pending(), { guard: false, standing: { person: null, decidedFor: null } })
      assert.strictEqual(transition(refused, "console:alice", approve, NOW)._tag, "Refused")
      const revoked = current(pending({ assignedGroup: "finance" }), { standing: { person: null, decidedFor: null } })
      assert.strictEqual(transition(revoked, "key-1", approve, NOW)._tag, "Revoked")
    })

    it("not in the assigned group nor a member's delegate: NotAssigned naming the group", () => {
      const outsider = current(pending({ assignedGroup: "finance" }), {
        standing: { person: "console:eve", decidedFor: null }
      })
      assert.deepStrictEqual(
        transition(outsider, "console:eve", approve, NOW),
        Outcome.NotAssigned({ group: "finance" })
      )
    })

    it("the shared reviewer address on a quorum names no person: Unattributed; on a single-decider approval it decides", () => {
      const shared = { person: "email:review@example.com", decidedFor: "email:review@example.com" }
      const onQuorum = current(pending({ quorum: 2 }), { standing: shared })
      assert.strictEqual(transition(onQuorum, "email:review@example.com", approve, NOW)._tag, "Unattributed")
      assert.strictEqual(
        transition(current(pending(), { standing: shared }), "email:review@example.com", approve, NOW)._tag,
        "Decided"
      )
    })
  })

  describe("quorum", () => {
    it("approvals short of the quorum are votes that leave it pending, counting down; the one that completes it decides", () => {
      const first = transition(current(pending({ quorum: 3 })), "console:alice", approve, NOW)
      assert.deepStrictEqual(first, Outcome.Voted({ voter: alice, remaining: 2 }))
      const second = transition(
        current(pending({ quorum: 3, votes: [vote("console:bob")] })),
        "console:alice",
        approve,
        NOW
      )
      assert.deepStrictEqual(second, Outcome.Voted({ voter: alice, remaining: 1 }))
      const last = transition(
        current(pending({ quorum: 3, votes: [vote("console:bob"), vote("console:carol")] })),
        "console:alice",
        approve,
        NOW
      )
      assert.deepStrictEqual(last, Outcome.Decided({ voter: alice, status: "approved", resolution: "allow" }))
    })

    it("one rejection closes it, whatever the approvals so far", () => {
      const outcome = transition(
        current(pending({ quorum: 3, votes: [vote("console:bob")] })),
        "console:alice",
        reject,
        NOW
      )
      assert.deepStrictEqual(outcome, Outcome.Decided({ voter: alice, status: "rejected", resolution: "reject" }))
    })

    it("a person votes once: by the same credential, by another of theirs, or for a member who has voted", () => {
      const sameCredential = pending({ quorum: 2, votes: [vote("console:alice")] })
      assert.strictEqual(transition(current(sameCredential), "console:alice", approve, NOW)._tag, "Duplicate")
      const otherKey = pending({
        quorum: 2,
        votes: [{ ...vote("key-alice"), person: "console:alice", decided_for: "console:alice" }]
      })
      assert.strictEqual(transition(current(otherKey), "console:alice", reject, NOW)._tag, "Duplicate")
    })

    it("votes recorded before people were named (no person) do not count as anyone's", () => {
      const legacy = pending({
        quorum: 2,
        votes: [{ decided_by: "key-old", person: null, decided_for: null, decision: "approve" }]
      })
      assert.deepStrictEqual(
        transition(current(legacy), "console:alice", approve, NOW),
        Outcome.Decided({ voter: alice, status: "approved", resolution: "allow" })
      )
    })
  })

  describe("delegation", () => {
    const delegate = { person: "console:dan", decidedFor: "console:bob" }

    it("a delegate's vote counts for the member they stand in for", () => {
      const outcome = transition(
        current(pending({ quorum: 2, assignedGroup: "finance" }), { standing: delegate }),
        "console:dan",
        approve,
        NOW
      )
      assert.deepStrictEqual(
        outcome,
        Outcome.Voted({
          voter: { actor: "console:dan", person: "console:dan", decidedFor: "console:bob" },
          remaining: 1
        })
      )
    })

    it("a member who voted is not counted again through a delegate, nor a delegate who voted for another member", () => {
      const memberVoted = pending({ quorum: 2, assignedGroup: "finance", votes: [vote("console:bob")] })
      assert.strictEqual(
        transition(current(memberVoted, { standing: delegate }), "console:dan", approve, NOW)._tag,
        "Duplicate"
      )
      const delegateVoted = pending({
        quorum: 3,
        assignedGroup: "finance",
        votes: [vote("console:dan", "approve", "console:carol")]
      })
      assert.strictEqual(
        transition(current(delegateVoted, { standing: delegate }), "console:dan", approve, NOW)._tag,
        "Duplicate"
      )
    })

    it("a delegation not in force leaves the delegate outside the group", () => {
      const outcome = transition(
        current(pending({ assignedGroup: "finance" }), { standing: { person: "console:dan", decidedFor: null } }),
        "console:dan",
        approve,
        NOW
      )
      assert.deepStrictEqual(outcome, Outcome.NotAssigned({ group: "finance" }))
    })
  })

  describe("deadlines", () => {
    const deadlines = (rule: Partial<PolicyRule>, fired: Partial<DeadlineState> = {}) => ({
      ...plan({ ...RULE, ...rule }, T0),
      ...fired
    })

    it("a final deadline that passed unfired is fired first: every deadline due, in order, expiry last", () => {
      const expiresAt = T0 + 900_000
      assert.deepStrictEqual(
        transition(current(pending()), "console:alice", approve, expiresAt),
        Outcome.Lapsed({ due: ["expiring", "expire"] })
      )
      assert.strictEqual(transition(current(pending()), "console:alice", approve, expiresAt - 1)._tag, "Decided")
      const chain = deadlines({
        review_seconds: 60,
        expiring_notice_seconds: 30,
        escalation_seconds: 120,
        escalation_chain: ["a", "b"]
      })
      assert.deepStrictEqual(
        transition(current(pending({ deadlines: chain })), "console:alice", reject, chain.expiresAt + 5_000),
        Outcome.Lapsed({ due: ["escalate", "escalate", "expiring", "expire"] })
      )
    })

    it("what already fired does not fire again", () => {
      const noticed = deadlines({}, { expiringSent: true })
      assert.deepStrictEqual(
        transition(current(pending({ deadlines: noticed })), "console:alice", approve, T0 + 900_000),
        Outcome.Lapsed({ due: ["expire"] })
      )
    })

    it("a lapsed approval expires before a vote is counted, a duplicate found, or a quorum completed", () => {
      const late = T0 + 900_000
      assert.strictEqual(
        transition(current(pending({ quorum: 2, votes: [vote("console:alice")] })), "console:alice", approve, late)
          ._tag,
        "Lapsed"
      )
      assert.strictEqual(
        transition(current(pending({ quorum: 2, votes: [vote("console:bob")] })), "console:alice", approve, late)._tag,
        "Lapsed"
      )
    })

    it("but a refusal of the decider comes before it: they learn nothing of the approval's deadlines", () => {
      const late = T0 + 900_000
      const outsider = current(pending({ assignedGroup: "finance" }), {
        standing: { person: "console:eve", decidedFor: null }
      })
      assert.strictEqual(transition(outsider, "console:eve", approve, late)._tag, "NotAssigned")
    })
  })

  describe("edits", () => {
    it("edited arguments on one decider's approval decide it", () => {
      assert.deepStrictEqual(
        transition(current(pending()), "console:alice", approveEdited, NOW),
        Outcome.Decided({ voter: alice, status: "approved", resolution: "allow" })
      )
    })

    it("edited arguments under a quorum are refused, before a shared address, a lapsed deadline or a vote", () => {
      assert.strictEqual(
        transition(current(pending({ quorum: 2 })), "console:alice", approveEdited, NOW)._tag,
        "EditWithQuorum"
      )
      const shared = { person: "email:review@example.com", decidedFor: "email:review@example.com" }
      assert.strictEqual(
        transition(
          current(pending({ quorum: 2 }), { standing: shared }),
          "email:review@example.com",
          approveEdited,
          NOW
        )._tag,
        "EditWithQuorum"
      )
      assert.strictEqual(
        transition(current(pending({ quorum: 2 })), "console:alice", approveEdited, T0 + 900_000)._tag,
        "EditWithQuorum"
      )
    })

    it("a response with a rejection is no edit: under a quorum it rejects", () => {
      const outcome = transition(
        current(pending({ quorum: 2, votes: [vote("console:bob")] })),
        "console:alice",
        reject,
        NOW
      )
      assert.deepStrictEqual(outcome, Outcome.Decided({ voter: alice, status: "rejected", resolution: "reject" }))
    })

    it("an edit checked against a read that went stale is decided again under the lock: closed, or escalated to another group", () => {
      // Before the edit is checked (no lock) the approval was pending and Alice's to decide.
      assert.strictEqual(transition(current(pending()), "console:alice", approveEdited, NOW)._tag, "Decided")
      // Under the lock it was decided meanwhile, or escalated to a group she is not in.
      assert.deepStrictEqual(
        transition(current(pending({ status: "approved" })), "console:alice", approveEdited, NOW),
        Outcome.Closed({ status: "approved" })
      )
      const escalated = current(pending({ assignedGroup: "cfo" }), {
        standing: { person: "console:alice", decidedFor: null }
      })
      assert.deepStrictEqual(
        transition(escalated, "console:alice", approveEdited, NOW),
        Outcome.NotAssigned({ group: "cfo" })
      )
    })
  })

  it("an outcome left out of a match is a type error", () => {
    const describe = (outcome: Outcome) =>
      // @ts-expect-error: `Decided` is not matched
      Outcome.$match(outcome, {
        Missing: () => "missing",
        Closed: () => "closed",
        Refused: () => "refused",
        Revoked: () => "revoked",
        NotAssigned: () => "not assigned",
        EditWithQuorum: () => "edit with quorum",
        Unattributed: () => "unattributed",
        Lapsed: () => "lapsed",
        Duplicate: () => "duplicate",
        Voted: () => "voted"
      })
    assert.strictEqual(describe(Outcome.Missing()), "missing")
  })
})
