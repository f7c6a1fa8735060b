/**
 * "Approvals" in a real browser: a live list over the organization's
 * stream; each card shows what a person needs to decide (task name, tool,
 * the session's earlier steps) and takes an optional reason; "History"
 * shows closed approvals with who, when and why. A card edits the
 * arguments before approving, or answers the agent instead.
 */
import { afterAll, assert, beforeAll, it } from "vitest"
import { screenshots } from "./layout.ts"
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
const requestApproval = async (
  tool: string,
  args: unknown,
  actionClass = "deploy",
  sessionBody: Record<string, unknown> = {}
) => {
  const session = await world.api("POST", "/v1/agent-sessions", sessionBody)
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

/** The id of the organization's stream event that requested this approval (read from its kept history). */
const eventIdOf = async (approvalId: string): Promise<string> => {
  const response = await fetch(`${world.baseUrl}/v1/agent-approvals/events/stream?after=0`, {
    headers: { authorization: `Bearer ${world.adminKey}` }
  })
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
  let text = ""
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) throw new Error(`the stream ended before approval ${approvalId} was requested in it`)
      text += value
      const found = new RegExp(`id: (\\d+)\\nevent: approval\\.requested\\ndata: \\{"approval_id":"${approvalId}"`)
        .exec(text)
      if (found) return found[1]!
    }
  } finally {
    await reader.cancel()
  }
}

describeBrowser("Approvals", () => {
  it("an approval requested through the API appears without reload, counts down, and is approved with the button", async () => {
    const { page, done } = await world.open()
    await signIn(page, await world.link("approver", "Alex Approver"))
    // The console routes to the preset's first screen once the session is known.
    await page.waitForURL((url) => url.pathname === "/console/approvals")
    assert.deepStrictEqual(
      await page.getByRole("navigation", { name: "Screens" }).getByRole("link").allTextContents(),
      ["Approvals"]
    )
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

  it("one approval's page (?approval=<id>, the MCP gateway's link) shows that card alone, then says it no longer waits", async () => {
    const approvalId = await requestApproval("restart-cache", { region: "eu" })
    const other = await requestApproval("resize-disk", { size: 200 })
    const { page, done } = await world.open()
    await signIn(page, await world.link("approver", "Alex Approver"))
    await page.goto(`${world.baseUrl}/console/approvals?approval=${approvalId}`)
    const card = page.getByRole("listitem", { name: /restart-cache/ })
    await card.waitFor()
    await page.getByText(`Showing approval ${approvalId} alone.`).waitFor()
    assert.strictEqual(await page.getByRole("listitem", { name: /resize-disk/ }).count(), 0)
    await card.getByRole("button", { name: "Approve" }).click()
    await page.getByText(`Approval ${approvalId} is not waiting for a decision`).waitFor()
    assert.strictEqual((await world.api("GET", `/v1/agent-approvals/${approvalId}`)).body.status, "approved")
    // "Pending" shows every waiting approval again.
    await page.getByRole("navigation", { name: "Approvals views" }).getByRole("link", { name: /Pending/ }).click()
    await page.getByRole("listitem", { name: /resize-disk/ }).waitFor()
    assert.strictEqual(
      (await world.api("POST", `/v1/agent-approvals/${other}/decision`, { decision: "reject" })).status,
      200
    )
    await done()
  })

  it("reads well at 390 px in dark mode, and Reject works from the keyboard alone", async () => {
    const approvalId = await requestApproval("drop-table", { table: "users" })
    const { page, done } = await world.open({ colorScheme: "dark", width: 390 })
    await signIn(page, await world.link("approver", "Alex Approver"))
    const card = page.getByRole("listitem", { name: /drop-table/ })
    await card.waitFor()
    // Approvals closed before the page opened (the stream replays them first) are not news.
    await page.getByText("Live: new and decided approvals appear here by themselves.").waitFor()
    assert.strictEqual(await page.getByText(/elsewhere|by its timeout action/).count(), 0)
    const overflow = await page.evaluate(() =>
      document.documentElement.scrollWidth - document.documentElement.clientWidth
    )
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
    // Windows long enough for the card to show each first on a busy machine
    // (four browser files at a time on two cores). The approval is asked for
    // before the page opens, so its card is in the first list read; each
    // later state arrives live.
    const policy = await world.api("PUT", "/v1/approval-policies/quick", {
      mode: "require_approval",
      review_seconds: 12,
      expiring_notice_seconds: 0,
      escalation_seconds: 12,
      timeout_action: "reject"
    })
    assert.strictEqual(policy.status, 200, JSON.stringify(policy.body))
    await requestApproval("restart-cache", { node: 3 }, "quick")
    const { page, done } = await world.open()
    await signIn(page, await world.link("approver", "Alex Approver"))
    const card = page.getByRole("listitem", { name: /restart-cache/ })
    await card.getByText("Escalates in").waitFor()
    await page.getByText("Live: new and decided approvals appear here by themselves.").waitFor()
    await card.getByText("Expires in").waitFor({ timeout: 40_000 })
    assert.include(await card.textContent(), "Escalationescalated")
    await card.waitFor({ state: "detached", timeout: 40_000 })
    await page.getByText("An approval for restart-cache expired: rejected by its timeout action.").waitFor()
    await done()
  })

  it("a card approves with edited arguments, checked by the class's schema, or answers the agent instead", async () => {
    const policy = await world.api("PUT", "/v1/approval-policies/refunds", {
      mode: "require_approval",
      review_seconds: 600,
      expiring_notice_seconds: 0,
      timeout_action: "reject",
      arguments_schema: {
        type: "object",
        required: ["order", "amount"],
        properties: { order: { type: "integer" }, amount: { type: "number", maximum: 500 } }
      }
    })
    assert.strictEqual(policy.status, 200, JSON.stringify(policy.body))
    const edited = await requestApproval("refund-edit", { order: 31, amount: 1200 }, "refunds")
    const answered = await requestApproval("refund-answer", { order: 32, amount: 80 }, "refunds")
    const { page, done } = await world.open()
    await signIn(page, await world.link("approver", "Alex Approver"))
    const card = page.getByRole("listitem", { name: /refund-edit/ })
    await card.waitFor()
    await card.getByText("Edit the arguments, or answer instead").click()
    const args = card.getByRole("textbox", { name: /Arguments to run with/ })
    await args.fill(JSON.stringify({ order: 31, amount: 900 }))
    await card.getByRole("button", { name: "Approve" }).click()
    await card.getByRole("alert").getByText(/Approve of refund-edit \(refunds, approval [0-9a-f-]{36}\) refused\./)
      .waitFor()
    assert.include(await card.getByRole("alert").textContent(), "arguments.amount must be <= 500")
    assert.strictEqual((await world.api("GET", `/v1/agent-approvals/${edited}`)).body.status, "pending")
    await args.fill(JSON.stringify({ order: 31, amount: 500 }, null, 2))
    await checkAccessibility(page, "an approval card with its arguments editor")
    await screenshot(page, "approvals-edit")
    await card.getByRole("button", { name: "Approve" }).click()
    await card.waitFor({ state: "detached" })
    const snapshot = await world.api("GET", `/v1/agent-approvals/${edited}`)
    assert.deepStrictEqual([snapshot.body.status, snapshot.body.approved_arguments, snapshot.body.arguments_changed], [
      "approved",
      { order: 31, amount: 500 },
      ["/amount"]
    ])

    const other = page.getByRole("listitem", { name: /refund-answer/ })
    await other.getByText("Edit the arguments, or answer instead").click()
    await other.getByRole("textbox", { name: /Answer to the agent/ }).fill("Order 32 ships tomorrow; no refund needed.")
    await other.getByRole("button", { name: "Reject" }).click()
    await other.waitFor({ state: "detached" })
    const rejected = await world.api("GET", `/v1/agent-approvals/${answered}`)
    assert.deepStrictEqual([rejected.body.status, rejected.body.response], [
      "rejected",
      "Order 32 ships tomorrow; no refund needed."
    ])
    await done()
  })

  it("a card names the task, the tool and the session's earlier steps; Reject takes a reason; History shows who, when and why", async () => {
    const allowed = await world.api("PUT", "/v1/approval-policies/crm.read", {
      mode: "allow",
      review_seconds: 60,
      expiring_notice_seconds: 0,
      timeout_action: "reject"
    })
    assert.strictEqual(allowed.status, 200)
    const task = await world.api("POST", "/v1/tasks", { name: "Customer refunds", answer_schema: { type: "object" } })
    assert.strictEqual(task.status, 201, JSON.stringify(task.body))
    const session = await world.api("POST", "/v1/agent-sessions", { task_id: task.body.id })
    const steps = `/v1/agent-sessions/${session.body.id}/steps`
    for (const [stepId, tool] of [["look-1", "crm.find-customer"], ["look-2", "crm.list-orders"]]) {
      const step = await world.api("POST", steps, {
        step_id: stepId,
        tool,
        action_class: "crm.read",
        arguments: { customer: 7 }
      })
      assert.strictEqual(step.body.decision, "allow")
    }
    const pending = await world.api("POST", steps, {
      step_id: "refund",
      tool: "payments.refund-order",
      action_class: "deploy",
      arguments: { order: 31, amount: 1200 }
    })
    assert.strictEqual(pending.body.decision, "pending")
    const approvalId = pending.body.approval_id as string

    const { page, done } = await world.open()
    await signIn(page, await world.link("approver", "Alex Approver"))
    const card = page.getByRole("listitem", { name: /payments\.refund-order/ })
    await card.waitFor()
    await card.getByText("Customer refunds").waitFor()
    assert.notInclude(await card.textContent(), task.body.id)
    const earlier = card.getByRole("list", { name: "Earlier steps in this session" })
    assert.deepStrictEqual(
      (await earlier.getByRole("listitem").allTextContents()).map((text) => text.replace(/\s+/g, " ").trim()),
      ["crm.find-customer · crm.read allowed", "crm.list-orders · crm.read allowed"]
    )
    await card.getByRole("heading", { name: "Earlier steps in this session (2)" }).waitFor()
    await checkAccessibility(page, "an approval card with its context")
    await card.getByRole("textbox", { name: /Reason \(optional\)/ }).fill("Order 31 was refunded last week already.")
    await screenshot(page, "approvals-context")
    await card.getByRole("button", { name: "Reject" }).click()
    await card.waitFor({ state: "detached" })
    const snapshot = await world.api("GET", `/v1/agent-approvals/${approvalId}`)
    assert.strictEqual(snapshot.body.status, "rejected")
    assert.strictEqual(snapshot.body.decision_reason, "Order 31 was refunded last week already.")
    assert.strictEqual(snapshot.body.decided_by, "console:Alex Approver")

    await page.getByRole("navigation", { name: "Approvals views" }).getByRole("link", { name: "History" }).click()
    await page.waitForURL((url) => url.search === "?view=history")
    const table = page.getByRole("table", { name: "Decided and expired approvals" })
    const row = table.getByRole("row", { name: /payments\.refund-order/ })
    await row.waitFor()
    const cells = (await row.getByRole("cell").allTextContents()).map((text) => text.replace(/\s+/g, " ").trim())
    assert.strictEqual(cells[1], "Customer refunds")
    assert.strictEqual(cells[2], "rejected")
    assert.strictEqual(cells[3], "Alex Approver (console)")
    assert.match(cells[4]!, /\d/)
    assert.strictEqual(cells[5], "Order 31 was refunded last week already.")
    await checkAccessibility(page, "the approvals history")
    await screenshot(page, "approvals-history")
    // Decided elsewhere with a reason: the history shows it without a reload, and the API key as the decider.
    const other = await requestApproval("restart-workers", { pool: "b" })
    const decided = await world.api("POST", `/v1/agent-approvals/${other}/decision`, {
      decision: "approve",
      reason: "Planned restart."
    })
    assert.strictEqual(decided.status, 200)
    const otherRow = table.getByRole("row", { name: /restart-workers/ })
    await otherRow.waitFor()
    assert.include(await otherRow.textContent(), "Planned restart.")
    assert.include(await otherRow.textContent(), "API key")
    await done()
  })
  it("an approval closed elsewhere before the click keeps its card, saying so there with the focus, until dismissed", async () => {
    const approvalId = await requestApproval("purge-cache", { region: "us" })
    const requestedEvent = await eventIdOf(approvalId)
    const { page, done } = await world.open()
    // The stream's first connection ends at once (after the list loads); the next waits until released,
    // then resumes after the approval's request (as a reconnection resumes after its last event): the
    // closing below reaches the page first as the answer to its own Approve, then as the stream's event.
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    let streams = 0
    await page.route("**/v1/agent-approvals/events/stream", async (route) => {
      if (++streams === 1) {
        return route.fulfill({ status: 200, headers: { "content-type": "text/event-stream" }, body: "retry: 100\n\n" })
      }
      await released
      await route.continue({ headers: { ...route.request().headers(), "last-event-id": requestedEvent } })
    })
    await signIn(page, await world.link("approver", "Alex Approver"))
    const card = page.getByRole("listitem", { name: /purge-cache/ })
    await card.waitFor()
    await page.getByText("Reconnecting to the live stream…").waitFor()
    const decided = await world.api("POST", `/v1/agent-approvals/${approvalId}/decision`, {
      decision: "reject",
      reason: "Done by hand."
    })
    assert.strictEqual(decided.status, 200, JSON.stringify(decided.body))

    await card.getByRole("button", { name: "Approve" }).click()
    const refusal = card.locator(".refusal")
    await refusal.waitFor()
    assert.strictEqual(
      (await refusal.locator("p").first().textContent())?.trim(),
      `Approve of purge-cache (deploy, approval ${approvalId}) refused. It was closed elsewhere meanwhile: it is rejected now; nothing was changed.`
    )
    assert.isTrue(
      await refusal.evaluate((node) => node === document.activeElement),
      "the focus is on the refusal in the card"
    )
    assert.strictEqual(await card.getByRole("button", { name: /^(Approve|Reject)$/ }).count(), 0)
    assert.strictEqual(
      await page.locator(".notice-slot").first().textContent(),
      "",
      "nothing is said at the top of the page"
    )

    // The stream's own event for it arrives: the card stays, now saying who closed it, and the focus stays.
    release()
    await page.getByText("Live: new and decided approvals appear here by themselves.").waitFor()
    await refusal.getByText(/^It was rejected by .*: “Done by hand\.”$/).waitFor()
    assert.isTrue(await refusal.evaluate((node) => node === document.activeElement), "the focus stayed")
    assert.strictEqual(await page.locator(".notice-slot").first().textContent(), "")
    assert.include(await card.locator(".countdown").textContent(), "never: it is closed")
    assert.strictEqual(
      await page.getByRole("navigation", { name: "Approvals views" }).getByRole("link", { name: /Pending/ })
        .textContent(),
      "Pending (0)"
    )
    await checkAccessibility(page, "a card closed elsewhere")
    await screenshots(page, "approvals-closed-elsewhere")

    await card.getByRole("button", { name: "Dismiss" }).click()
    await card.waitFor({ state: "detached" })
    await page.getByText("No approval is waiting for a decision.").waitFor()
    assert.strictEqual((await world.api("GET", `/v1/agent-approvals/${approvalId}`)).body.status, "rejected")
    await done()
  })
})
