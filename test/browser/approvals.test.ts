/** "Approvals" in a real browser (issue 11, items 8 and 12): a live list over the organization's stream. */
import { afterAll, assert, beforeAll, it } from "vitest"
import { checkAccessibility, describeBrowser, screenshot, signIn, startWorld, until, type World } from "./support.ts"

let world: World

beforeAll(async () => {
  world = await startWorld("approvals")
  const policy = await world.api("PUT", "/v1/approval-policies/deploy", {
    mode: "require_approval",
    review_seconds: 600,
    expiring_notice_seconds: 0,
    escalation_seconds: 300,
    timeout_action: "reject"
  })
  assert.strictEqual(policy.status, 200, JSON.stringify(policy.body))
})
afterAll(async () => {
  await world?.close()
})

/** An agent asks to run a governed step; the policy makes it wait for a person. */
const requestApproval = async (tool: string, args: unknown, actionClass = "deploy") => {
  const session = await world.api("POST", "/v1/agent-sessions", {})
  assert.strictEqual(session.status, 201, JSON.stringify(session.body))
  const step = await world.api("POST", `/v1/agent-sessions/${session.body.id}/steps`, {
    step_id: `step-${tool}`,
    tool,
    action_class: actionClass,
    arguments: args
  })
  assert.strictEqual(step.body.decision, "pending", JSON.stringify(step.body))
  return step.body.approval_id as string
}

describeBrowser("Approvals", () => {
  it("an approval requested through the API appears without reload, counts down, and is approved with the button", async () => {
    const { page, done } = await world.open()
    await signIn(page, await world.link("approver", "Alex Approver"))
    // The console routes to the preset's first screen once the session is known.
    await page.waitForURL((url) => url.pathname === "/console/approvals")
    assert.deepStrictEqual(await page.getByRole("navigation", { name: "Screens" }).getByRole("link").allTextContents(), ["Approvals"])
    await page.getByText("No approval is waiting for a decision.").waitFor()
    await page.getByText("Live: new and decided approvals appear here by themselves.").waitFor()
    // A marker that a reload would lose.
    await page.evaluate(() => ((globalThis as any).__noReload = true))

    const approvalId = await requestApproval("deploy-production", { service: "billing", version: "2.4.1" })
    const card = page.getByRole("listitem", { name: /deploy-production/ })
    await card.waitFor()
    assert.include(await card.textContent(), "\"version\": \"2.4.1\"")
    assert.include(await card.textContent(), "If nobody decidesreject")
    assert.include(await card.textContent(), "at the deadline, with more review time")
    const countdown = card.locator(".countdown")
    const before = await countdown.textContent()
    await until(async () => (await countdown.textContent()) !== before, "the countdown to move")
    await checkAccessibility(page, "the approvals list")
    await screenshot(page, "approvals")

    // Another approval, decided elsewhere meanwhile: it leaves the list by itself.
    const other = await requestApproval("rotate-keys", { scope: "all" })
    const otherCard = page.getByRole("listitem", { name: /rotate-keys/ })
    await otherCard.waitFor()
    const decided = await world.api("POST", `/v1/agent-approvals/${other}/decision`, { decision: "reject" })
    assert.strictEqual(decided.status, 200)
    await otherCard.waitFor({ state: "detached" })
    await page.getByText(/An approval for rotate-keys was rejected elsewhere/).waitFor()

    await card.getByRole("button", { name: "Approve" }).click()
    await card.waitFor({ state: "detached" })
    await page.getByText("Approved: deploy-production (deploy).").waitFor()
    const snapshot = await world.api("GET", `/v1/agent-approvals/${approvalId}`)
    assert.strictEqual(snapshot.body.status, "approved")
    assert.strictEqual(snapshot.body.decided_by, "console:Alex Approver")
    assert.isTrue(await page.evaluate(() => (globalThis as any).__noReload === true), "the page was never reloaded")
    await done()
  })

  it("reads well at 390 px in dark mode, and Reject works from the keyboard alone", async () => {
    const approvalId = await requestApproval("drop-table", { table: "users" })
    const { page, done } = await world.open({ colorScheme: "dark", width: 390 })
    await signIn(page, await world.link("approver", "Alex Approver"))
    const card = page.getByRole("listitem", { name: /drop-table/ })
    await card.waitFor()
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)
    assert.isAtMost(overflow, 0)
    await checkAccessibility(page, "approvals at 390 px, dark")
    await screenshot(page, "approvals-390-dark")
    // Tab to the card's Reject button and press Enter.
    const reject = card.getByRole("button", { name: "Reject" })
    for (let i = 0; i < 40 && !(await reject.evaluate((button) => button === document.activeElement)); i++) {
      await page.keyboard.press("Tab")
    }
    assert.isTrue(await reject.evaluate((button) => button === document.activeElement), "Reject reachable with Tab")
    await page.keyboard.press("Enter")
    await card.waitFor({ state: "detached" })
    const snapshot = await world.api("GET", `/v1/agent-approvals/${approvalId}`)
    assert.strictEqual(snapshot.body.status, "rejected")
    await done()
  })

  it("escalation and expiry update the list live: the countdown moves to the new deadline, then the approval leaves with a notice", async () => {
    const policy = await world.api("PUT", "/v1/approval-policies/quick", {
      mode: "require_approval",
      review_seconds: 2,
      expiring_notice_seconds: 0,
      escalation_seconds: 3,
      timeout_action: "reject"
    })
    assert.strictEqual(policy.status, 200, JSON.stringify(policy.body))
    const { page, done } = await world.open()
    await signIn(page, await world.link("approver", "Alex Approver"))
    await page.getByText("Live: new and decided approvals appear here by themselves.").waitFor()
    await requestApproval("restart-cache", { node: 3 }, "quick")
    const card = page.getByRole("listitem", { name: /restart-cache/ })
    await card.getByText("Escalates in").waitFor()
    await card.getByText("Expires in").waitFor({ timeout: 15_000 })
    assert.include(await card.textContent(), "Escalationescalated")
    await card.waitFor({ state: "detached", timeout: 15_000 })
    await page.getByText("An approval for restart-cache expired: rejected by its timeout action.").waitFor()
    await done()
  })
})
