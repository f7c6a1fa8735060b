import { assert, describe, it } from "vitest"
import type { Problem } from "../../../console/src/api.ts"
import {
  addPayload,
  addressPayload,
  checkDelegation,
  checkGroup,
  createPayload,
  fieldLabel,
  problemIssues,
  removePayload
} from "../../../console/src/screens/reviewer-draft.ts"

const KEY = "0193b7a2-6f1e-7c3a-9a55-2f4e8c1d0b17"

const members = [
  { console_user: "Ana Lima", email: "ana@example.com", email_status: "pending" as const },
  { key_id: KEY, email: null, email_status: null }
]

const problem = (code: string, fields: Record<string, unknown> = {}): Problem => ({
  tag: code,
  code,
  status: 400,
  title: "The request is invalid",
  detail: typeof fields.detail === "string" ? fields.detail : undefined,
  error: { code, ...fields }
})

const describeProblem = (p: Problem) => `in words: ${p.code}`

describe("the Reviewers screen's group payloads", () => {
  it("a new group sends an address only where one is typed in", () => {
    assert.deepStrictEqual(
      createPayload([
        { kind: "console_user", who: "Ana Lima", email: " ana@example.com " },
        { kind: "key_id", who: ` ${KEY} `, email: "" }
      ]),
      { members: [{ console_user: "Ana Lima", email: "ana@example.com" }, { key_id: KEY }] }
    )
  })

  it("an edit leaves the other members' addresses out, so a pending one is not mailed again", () => {
    assert.deepStrictEqual(removePayload(members, 1), { members: [{ console_user: "Ana Lima" }] })
    assert.deepStrictEqual(addPayload(members, { kind: "console_user", who: "Ben", email: "" }), {
      members: [{ console_user: "Ana Lima" }, { key_id: KEY }, { console_user: "Ben" }]
    })
    assert.deepStrictEqual(addressPayload(members, 1, "night@example.com"), {
      members: [{ console_user: "Ana Lima" }, { key_id: KEY, email: "night@example.com" }]
    })
    assert.deepStrictEqual(addressPayload(members, 0, null), {
      members: [{ console_user: "Ana Lima", email: null }, { key_id: KEY }]
    })
  })
})

describe("the Reviewers screen's problems, each naming its field", () => {
  it("the contract's schemas name the name and each member's field before anything is sent", () => {
    assert.deepStrictEqual(
      checkGroup("payments-leads", { members: [{ console_user: "Ana Lima", email: "ana@example.com" }] }),
      []
    )
    const issues = checkGroup("payments leads!", {
      members: [{ console_user: "Ana Lima", email: "not an address" }, { key_id: "nope" }]
    })
    assert.deepStrictEqual(issues.map((issue) => issue.field), ["name", "members[0].email", "members[1].key_id"])
    assert.match(issues[0]!.message, /^Expected 1 to 64 letters/)
    assert.strictEqual(issues[1]!.message, "Expected an email address")
    assert.deepStrictEqual(
      checkGroup("g", { members: [{ console_user: "Ana" }, { console_user: "Ana" }] }).map((issue) => issue.field),
      ["members"]
    )
  })

  it("a delegation's window is checked by the contract when it has a start", () => {
    const delegate = { console_user: "Ben" }
    assert.deepStrictEqual(checkDelegation({ delegate, ends_at: "2026-12-01T00:00:00.000Z" }), [])
    assert.deepStrictEqual(
      checkDelegation({ delegate, starts_at: "2026-12-01T00:00:00.000Z", ends_at: "2026-11-30T00:00:00.000Z" }),
      [{ field: "ends_at", message: "ends_at must be after starts_at." }]
    )
  })

  it("the API's errors, its field, a field its detail names, or the request as a whole", () => {
    const errors = [{ field: "members[0].email", message: "Expected an email address" }]
    assert.deepStrictEqual(
      problemIssues(problem("INVALID_REQUEST", { errors, field: "members[0].email" }), describeProblem),
      errors
    )
    assert.deepStrictEqual(
      problemIssues(
        problem("INVALID_REQUEST", { field: "delegate", detail: "A person cannot delegate to themselves." }),
        describeProblem
      ),
      [{ field: "delegate", message: "A person cannot delegate to themselves." }]
    )
    const unknownKey =
      "No active API key of the organization holding approvals.decide has the id members[2].key_id names."
    assert.deepStrictEqual(problemIssues(problem("NOT_FOUND", { detail: unknownKey }), describeProblem), [{
      field: "members[2].key_id",
      message: unknownKey
    }])
    const inUse = "A policy names this group, or a pending approval is assigned to it: change those first."
    assert.deepStrictEqual(problemIssues(problem("GROUP_IN_USE", { detail: inUse }), describeProblem), [{
      field: "",
      message: inUse
    }])
    assert.deepStrictEqual(
      problemIssues(problem("INSUFFICIENT_SCOPE", { detail: "Needs org_config.write" }), describeProblem),
      [
        { field: "", message: "in words: INSUFFICIENT_SCOPE" }
      ]
    )
  })

  it("fields in words", () => {
    assert.deepStrictEqual(
      ["members[1].email", "members[0].key_id", "members", "name", "delegate", "ends_at", "other"].map(fieldLabel),
      ["Member 2, address", "Member 1, API key", "Members", "Name", "Delegate to", "Ends", "other"]
    )
  })
})
