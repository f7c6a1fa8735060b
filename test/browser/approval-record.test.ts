/**
 * What an approval card and the history tell a person, in a real browser:
 * the rule that required the approval, its reviewer group and the groups
 * its escalation chain still hands it to, every vote with who acted (an API
 * key by its name), for whom, when and why; the edited arguments and the
 * answer sent instead of the tool in the history; and a refused decision
 * said in its own card, naming the approval and the rule it broke, with
 * the focus moved there.
 */
import { afterAll, assert, beforeAll, it } from "vitest"
import { screenshots } from "./layout.ts"
import { checkAccessibility, describeBrowser, signIn, startWorld, type World } from "./support.ts"

let world: World
let bob: { id: string; key: string }

const settings = { review_seconds: 600, expiring_notice_seconds: 0, timeout_action: "reject" }
const chain = { group: "leads", escalation_seconds: 600, escalation_chain: ["finance", "cfo"] }

beforeAll(async () => {
  world = await startWorld("approval-record")
  const made = await world.api("POST", "/v1/api-keys", { name: "bob", scopes: ["approvals.decide", "agents.read"] })
  assert.strictEqual(made.status, 201, JSON.stringify(made.body))
  bob = { id: made.body.api_key.id, key: made.body.key }
  for (const group of ["leads", "finance", "cfo"]) {
    const put = await world.api("PUT", `/v1/reviewer-groups/${group}`, {
      members: [{ console_user: "Alex Approver" }, { key_id: bob.id }]
    })
    assert.strictEqual(put.status, 200, JSON.stringify(put.body))
  }
  const policy = await world.api("PUT", "/v1/approval-policies/payments.payout", {
    mode: "require_approval",
    ...settings,
    ...chain,
    arguments_schema: {
      type: "object",
      required: ["amount"],
      properties: { amount: { type: "number", maximum: 1000 }, to: { type: "string" } }
    },
    rules: [{
      name: "large",
      condition: "arguments.amount > 1000.0",
      result: { decision: "require_approval", ...settings, ...chain, quorum: 2 }
    }]
  })
  assert.strictEqual(policy.status, 200, JSON.stringify(policy.body))
})
afterAll(async () => {
  await world?.close()
})

const payout = async (stepId: string, amount: number) => {
  const session = await world.api("POST", "/v1/agent-sessions", {})
  const step = await world.api("POST", `/v1/agent-sessions/${session.body.id}/steps`, {
    step_id: stepId,
    tool: "bank.payout",
    action_class: "payments.payout",
    arguments: { amount, to: "DE89370400440532013000" }
  })
  assert.strictEqual(step.body.decision, "pending", JSON.stringify(step.body))
  return step.body.approval_id as string
}

const flat = (text: string | null) => (text ?? "").replace(/\s+/g, " ").trim()

describeBrowser("An approval's record", () => {
  it("cards show rule, group, chain and named votes; a refused edit is said in its card with the focus there; history keeps every vote, edit and answer", async () => {
    const quorum = await payout("large", 4800)
    const edited = await payout("edited", 300)
    await payout("answered", 200)
    const voted = await world.api("POST", `/v1/agent-approvals/${quorum}/decision`, {
      decision: "approve",
      reason: "Invoice 2291 checked."
    }, bob.key)
    assert.strictEqual(voted.status, 200, JSON.stringify(voted.body))

    const { page, done } = await world.open()
    await signIn(page, await world.link("approver", "Alex Approver"))
    const card = (amount: number) =>
      page.getByRole("listitem").filter({ has: page.getByRole("heading", { name: /bank\.payout/ }) }).filter({
        hasText: `"amount": ${amount}`
      })
    const large = card(4800)
    await large.waitFor()
    const facts = flat(await large.locator("dl.facts").textContent())
    assert.include(facts, "Required byrule large")
    assert.include(facts, "Assigned toleads")
    assert.include(facts, "Escalates next tofinance → cfo")
    const votes = flat(await large.getByRole("region", { name: "Votes" }).textContent())
    assert.include(votes, "approved bob (API key)")
    assert.include(votes, "Invoice 2291 checked.")
    assert.notInclude(votes, bob.id, "a named key is not shown by its id")
    assert.include(
      flat(await card(300).locator("dl.facts").textContent()),
      "Required bythe action class's policy settings"
    )
    await checkAccessibility(page, "approval cards with rule, chain and named votes")
    await screenshots(page, "approvals-record-pending")

    // Edited arguments the schema refuses: said in that card, naming the approval, with the focus there.
    const editing = card(300)
    await editing.getByText("Edit the arguments, or answer instead").click()
    const args = editing.getByRole("textbox", { name: /Arguments to run with/ })
    await args.fill(JSON.stringify({ amount: 5000, to: "DE89370400440532013000" }))
    await editing.getByRole("button", { name: "Approve" }).click()
    const refusal = editing.getByRole("alert")
    await refusal.getByText(`Approve of bank.payout (payments.payout, approval ${edited}) refused.`).waitFor()
    assert.match(flat(await refusal.textContent()), /arguments schema.*amount.*1000/)
    assert.isTrue(
      await refusal.locator(".refusal").evaluate((node) => node === document.activeElement),
      "the focus moves to the refusal"
    )
    assert.strictEqual(await page.locator(".notice-slot .notice").count(), 0, "nothing at the top of the page")
    assert.strictEqual((await world.api("GET", `/v1/agent-approvals/${edited}`)).body.status, "pending")
    await checkAccessibility(page, "a refused edit at its card")
    await screenshots(page, "approvals-record-refused-edit")

    await args.fill(JSON.stringify({ amount: 900, to: "DE89370400440532013000" }))
    await editing.getByRole("button", { name: "Approve" }).click()
    await editing.waitFor({ state: "detached" })
    const answering = card(200)
    await answering.getByText("Edit the arguments, or answer instead").click()
    await answering.getByRole("textbox", { name: /Answer to the agent/ }).fill("Paid by card already; no payout.")
    await answering.getByRole("button", { name: "Reject" }).click()
    await answering.waitFor({ state: "detached" })
    await large.getByRole("button", { name: "Approve" }).click()
    await large.waitFor({ state: "detached" })

    await page.getByRole("navigation", { name: "Approvals views" }).getByRole("link", { name: "History" }).click()
    const table = page.getByRole("table", { name: "Decided and expired approvals" })
    const row = (amountText: string) => table.getByRole("row").filter({ hasText: amountText })
    await table.waitFor()
    const quorumRow = table.getByRole("row").filter({ has: page.getByRole("list", { name: "Votes on bank.payout" }) })
    await quorumRow.waitFor()
    const who = flat(await quorumRow.getByRole("list", { name: "Votes on bank.payout" }).textContent())
    assert.match(
      who,
      /approved bob \(API key\) · belongs to unnamed API key [0-9a-f-]{36} at .*: “Invoice 2291 checked\.”/
    )
    assert.include(who, "approved Alex Approver (console) at")
    const record = flat(await quorumRow.locator("td.record").textContent())
    assert.include(record, "Required by rule large")
    assert.include(record, "2 approvals needed")
    assert.include(record, "Escalation chain finance → cfo (not reached)")
    assert.include(
      flat(await row("edited arguments").textContent()),
      "Approved with edited arguments (changed: /amount)"
    )
    assert.include(
      flat(await row("Answered the agent").textContent()),
      "Answered the agent instead of running the tool: “Paid by card already; no payout.”"
    )
    await checkAccessibility(page, "the history with votes, edits and answers")
    await screenshots(page, "approvals-record-history")
    await done()
  })
})
