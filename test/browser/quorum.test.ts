/**
 * An approval that two people must approve, in a real browser: the card
 * shows the votes so far and how many remain; a vote that does not close
 * it keeps the card (with the vote) and the person cannot vote again; the
 * vote that completes the quorum closes it.
 */
import { afterAll, assert, beforeAll, it } from "vitest"
import {
  checkAccessibility,
  describeBrowser,
  pendingPayout,
  screenshot,
  signIn,
  startWorld,
  type World
} from "./support.ts"

let world: World

const settings = { review_seconds: 600, expiring_notice_seconds: 0, timeout_action: "reject" }

beforeAll(async () => {
  world = await startWorld("quorum")
  const policy = await world.api("PUT", "/v1/approval-policies/payments.payout", {
    mode: "require_approval",
    ...settings,
    rules: [
      { name: "small", condition: "arguments.amount <= 20.0", result: { decision: "allow" } },
      {
        name: "large",
        condition: "arguments.amount > 1000.0",
        result: { decision: "require_approval", ...settings, quorum: 2 }
      }
    ]
  })
  assert.strictEqual(policy.status, 200, JSON.stringify(policy.body))
})
afterAll(async () => {
  await world?.close()
})

const requestPayout = async (stepId: string, amount: number) => {
  const session = await world.api("POST", "/v1/agent-sessions", {})
  assert.strictEqual(session.status, 201, JSON.stringify(session.body))
  const small = await world.api("POST", `/v1/agent-sessions/${session.body.id}/steps`, {
    step_id: `${stepId}-lookup`,
    tool: "bank.payout",
    action_class: "payments.payout",
    arguments: { amount: 12, to: "NL91ABNA0417164300" }
  })
  assert.deepStrictEqual(small.body, { decision: "allow", rule: "small" })
  return pendingPayout(world, session.body.id, stepId, amount)
}

describeBrowser("Quorum", () => {
  it("the card shows the votes so far and how many remain; the approval that completes the quorum closes it", async () => {
    const approvalId = await requestPayout("payout-1", 4800)
    // Someone else approved already, with a reason.
    const first = await world.api("POST", `/v1/agent-approvals/${approvalId}/decision`, {
      decision: "approve",
      reason: "Invoice 2291 checked."
    })
    assert.strictEqual(first.status, 200, JSON.stringify(first.body))
    assert.strictEqual(first.body.status, "pending")

    const { page, done } = await world.open()
    await signIn(page, await world.link("approver", "Alex Approver"))
    const card = page.getByRole("listitem", { name: /bank\.payout/ }).filter({ hasText: "4800" })
    await card.waitFor()
    const votes = card.getByRole("region", { name: "Votes" })
    await votes.getByText("Votes: 1 of 2 approvals").waitFor()
    assert.include(await votes.textContent(), "Needs 1 more approval from different people")
    assert.include(await votes.textContent(), "Invoice 2291 checked.")
    // The earlier step names the rule that allowed it.
    assert.include(
      await card.getByRole("list", { name: "Earlier steps in this session" }).textContent(),
      "allowed · rule small"
    )
    await checkAccessibility(page, "an approval with a quorum")
    await screenshot(page, "approvals-quorum")

    await card.getByRole("button", { name: "Approve" }).click()
    await card.waitFor({ state: "detached" })
    const closed = await world.api("GET", `/v1/agent-approvals/${approvalId}`)
    assert.strictEqual(closed.body.status, "approved")
    assert.strictEqual(closed.body.decided_by, "console:Alex Approver")
    assert.deepStrictEqual(
      closed.body.votes.map((v: { decided_by: string }) => v.decided_by).at(-1),
      "console:Alex Approver"
    )
    await done()
  })

  it("a person's own vote keeps the card, shows the vote and what remains, and offers no second vote", async () => {
    const approvalId = await requestPayout("payout-2", 2500)
    const { page, done } = await world.open()
    await signIn(page, await world.link("approver", "Bea Approver"))
    const card = page.getByRole("listitem", { name: /bank\.payout/ }).filter({ hasText: "2500" })
    await card.waitFor()
    await card.getByText("No vote yet.").waitFor()
    // Every approver approves the same arguments: no arguments editor, only the answer to the agent.
    await card.getByText("Answer the agent instead").click()
    assert.strictEqual(await card.getByRole("textbox", { name: /Arguments to run with/ }).count(), 0)
    await card.getByText("2 people approve the same arguments, so they cannot be edited here.").waitFor()
    await card.getByRole("textbox", { name: /Reason/ }).fill("Matches the signed contract.")
    await card.getByRole("button", { name: "Approve" }).click()
    await page.getByText(/Your approval is recorded: bank.payout \(payments.payout\) needs 1 more from someone else./)
      .waitFor()
    const votes = card.getByRole("region", { name: "Votes" })
    await votes.getByText("Votes: 1 of 2 approvals").waitFor()
    assert.include(await votes.textContent(), "Bea Approver (console)")
    assert.include(await votes.textContent(), "Matches the signed contract.")
    await screenshot(page, "approvals-quorum-voted")

    // The person who voted is shown that they voted, and offered no second vote.
    await card.getByText("You voted on this approval. It waits for 1 more approval from someone else.").waitFor()
    assert.strictEqual(await card.getByRole("button", { name: "Approve" }).count(), 0)
    assert.strictEqual(await card.getByRole("button", { name: "Reject" }).count(), 0)
    const still = await world.api("GET", `/v1/agent-approvals/${approvalId}`)
    assert.strictEqual(still.body.status, "pending")
    assert.strictEqual(still.body.votes.length, 1)
    await done()
  })
  it("a vote shows who acted and for whom: a key made by another key is that key's person", async () => {
    const approvalId = await requestPayout("payout-3", 3500)
    const made = await world.api("POST", "/v1/api-keys", { name: "payout-bot", scopes: ["approvals.decide"] })
    assert.strictEqual(made.status, 201, JSON.stringify(made.body))
    const voted = await world.api(
      "POST",
      `/v1/agent-approvals/${approvalId}/decision`,
      { decision: "approve" },
      made.body.key
    )
    assert.strictEqual(voted.status, 200, JSON.stringify(voted.body))
    const maker = voted.body.votes[0].decided_by_person as string
    assert.strictEqual(voted.body.votes[0].decided_by, made.body.api_key.id)
    // Its maker, the key that made it, is the same person: its vote is refused.
    const again = await world.api("POST", `/v1/agent-approvals/${approvalId}/decision`, { decision: "approve" })
    assert.strictEqual(again.status, 409, JSON.stringify(again.body))
    const { page, done } = await world.open()
    await signIn(page, await world.link("approver", "Cal Approver"))
    const card = page.getByRole("listitem", { name: /bank\.payout/ }).filter({ hasText: "3500" })
    const votes = card.getByRole("region", { name: "Votes" })
    await votes.getByText("Votes: 1 of 2 approvals").waitFor()
    // The key by its name; its maker, a key without a name, by its whole id.
    assert.include(await votes.textContent(), `payout-bot (API key) · belongs to unnamed API key ${maker}`)
    await screenshot(page, "approvals-quorum-person")
    await done()
  })
})
