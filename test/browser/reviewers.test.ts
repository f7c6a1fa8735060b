/**
 * Reviewer groups in a real browser: an approval assigned to a group shows
 * its group; "Assigned to me" lists only those of the person's groups (or of
 * a member who delegated to them); a person outside the group is offered no
 * Approve or Reject, a member decides.
 */
import { afterAll, assert, beforeAll, it } from "vitest"
import { screenshots } from "./layout.ts"
import {
  checkAccessibility,
  describeBrowser,
  flat,
  pendingPayout,
  screenshot,
  signIn,
  startWorld,
  type World
} from "./support.ts"

let world: World

const settings = { review_seconds: 600, expiring_notice_seconds: 0, timeout_action: "reject" }

beforeAll(async () => {
  world = await startWorld("reviewers")
  const group = await world.api("PUT", "/v1/reviewer-groups/payments-leads", {
    members: [{ console_user: "Lena Lead" }]
  })
  assert.strictEqual(group.status, 200, JSON.stringify(group.body))
  const policy = await world.api("PUT", "/v1/approval-policies/payments.payout", {
    mode: "require_approval",
    ...settings,
    rules: [{
      name: "large",
      condition: "arguments.amount > 1000.0",
      result: { decision: "require_approval", ...settings, group: "payments-leads" }
    }]
  })
  assert.strictEqual(policy.status, 200, JSON.stringify(policy.body))
})
afterAll(async () => {
  await world?.close()
})

const requestPayout = async (stepId: string, amount: number) => {
  const session = await world.api("POST", "/v1/agent-sessions", {})
  return pendingPayout(world, session.body.id, stepId, amount)
}

describeBrowser("Reviewer groups", () => {
  it("a member sees the approval under Assigned to me, with its group, and decides it", async () => {
    const approvalId = await requestPayout("payout-big", 4800)
    await requestPayout("payout-small", 250)
    const { page, done } = await world.open()
    await signIn(page, await world.link("approver", "Lena Lead"))
    await page.getByRole("listitem", { name: /bank\.payout/ }).filter({ hasText: "250" }).waitFor()
    await page.getByRole("link", { name: /Assigned to me/ }).click()
    await page.getByRole("link", { name: "Assigned to me (1)" }).waitFor()
    const card = page.getByRole("listitem", { name: /bank\.payout/ }).filter({ hasText: "4800" })
    await card.waitFor()
    assert.strictEqual(await page.getByRole("listitem", { name: /bank\.payout/ }).count(), 1)
    assert.include(await card.textContent(), "Assigned topayments-leads")
    await checkAccessibility(page, "approvals assigned to me")
    await screenshot(page, "approvals-assigned-to-me")
    await card.getByRole("button", { name: "Approve" }).click()
    await card.waitFor({ state: "detached" })
    const closed = await world.api("GET", `/v1/agent-approvals/${approvalId}`)
    assert.strictEqual(closed.body.decided_by, "console:Lena Lead")
    await done()
  })

  it("a person outside the group is told who decides, and offered no Approve or Reject", async () => {
    await requestPayout("payout-other", 2600)
    const { page, done } = await world.open()
    await signIn(page, await world.link("approver", "Omar Outside"))
    const card = page.getByRole("listitem", { name: /bank\.payout/ }).filter({ hasText: "2600" })
    await card.getByText("Only members of payments-leads (or their delegates) decide this approval.").waitFor()
    assert.strictEqual(await card.getByRole("button", { name: "Approve" }).count(), 0)
    await page.getByRole("link", { name: "Assigned to me (0)" }).waitFor()
    await screenshot(page, "approvals-not-assigned")
    await done()
  })

  it("a refused change of one's own address, and a refused End of a delegation, are said at their control with the focus there", async () => {
    await requestPayout("payout-below", 300)
    // Your reviewer address, below the pending approvals: an address the service refuses.
    const approver = await world.open()
    await signIn(approver.page, await world.link("approver", "Olga Own"))
    const own = approver.page.getByRole("region", { name: "Your reviewer address" })
    await own.getByRole("textbox", { name: "Set another address" }).fill("olga@localhost")
    await own.getByRole("button", { name: "Use this address" }).click()
    const ownRefusal = own.locator(".refusal")
    await ownRefusal.waitFor()
    assert.match(
      flat(await ownRefusal.textContent()),
      /^Using olga@localhost as your reviewer address refused\. .*email address/
    )
    assert.isTrue(
      await own.evaluate((node) => node.contains(document.activeElement)),
      "the focus is in the address's card"
    )
    assert.strictEqual(
      await approver.page.locator(".notice-slot .notice.error").count(),
      0,
      "no refusal at the top of the page"
    )
    await screenshots(approver.page, "approvals-refused-own-address")
    await approver.done()

    // A delegation gone meanwhile (removed from the database): End is refused in its row.
    const { page, done } = await world.open()
    await signIn(page, await world.link("admin", "Ada Admin"))
    await page.goto(`${world.baseUrl}/console/reviewers`)
    await page.getByRole("heading", { name: "Delegations" }).waitFor()
    const made = await page.evaluate(async () => {
      const response = await fetch("/v1/reviewer-delegations", {
        method: "POST",
        headers: { "content-type": "application/json", "x-svc-console": "1" },
        body: JSON.stringify({
          delegate: { console_user: "Bob Backup" },
          ends_at: new Date(Date.now() + 86_400_000).toISOString()
        })
      })
      return response.status
    })
    assert.strictEqual(made, 200)
    await page.reload()
    const row = page.getByRole("row", { name: /Bob Backup/ })
    await row.getByRole("button", { name: "End delegation to Bob Backup" }).waitFor()
    await world.sql("DELETE FROM reviewer_delegations")
    await row.getByRole("button", { name: "End delegation to Bob Backup" }).click()
    await page.getByRole("dialog", { name: "End this delegation now?" }).getByRole("button", { name: "End delegation" })
      .click()
    const refusal = row.locator(".refusal")
    await refusal.waitFor()
    assert.match(
      flat(await refusal.textContent()),
      /^Ending the delegation to Bob Backup \(until .*\) refused\. .*no longer exists/
    )
    assert.isTrue(
      await row.evaluate((node) => node.contains(document.activeElement)),
      "the focus is in the delegation's row"
    )
    assert.strictEqual(await page.locator(".notice-slot .notice.error").count(), 0, "no refusal at the top of the page")
    await screenshots(page, "reviewers-refused-end")
    await done()
  })
})
