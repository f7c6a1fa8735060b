/**
 * Deciding from the reviewer mail in a real browser: svc mails a reviewer
 * through an SMTP server on loopback. A new reviewer address first gets a
 * confirmation mail whose page confirms it (once) and no approval mail
 * before; then the link in an approval mail opens the approval's page
 * without a sign-in; opening it decides nothing; pressing Approve records
 * `email:<reviewer address>`, which the console's history shows as a
 * reviewer mail decision; afterwards the link shows the final state, and
 * once the address is replaced the link opens nothing and says why. An
 * approval assigned to a reviewer group is mailed to its member's own
 * address instead, whose link decides as that member.
 */
import type { AddressInfo } from "node:net"
import type { Page } from "playwright-core"
import { SMTPServer } from "smtp-server"
import { afterAll, assert, beforeAll, it } from "vitest"
import { screenshots } from "./layout.ts"
import {
  checkAccessibility,
  describeBrowser,
  flat,
  screenshot,
  signIn,
  startWorld,
  until,
  type World
} from "./support.ts"

let world: World
let smtp: SMTPServer
const mails: Array<{ to: ReadonlyArray<string>; text: string }> = []

const decodeQuotedPrintable = (data: string) =>
  data.replace(/=\r?\n/g, "").replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)))

beforeAll(async () => {
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Array<Buffer> = []
      stream.on("data", (chunk: Buffer) => chunks.push(chunk))
      stream.on("end", () => {
        mails.push({
          to: session.envelope.rcptTo.map((r) => r.address),
          text: decodeQuotedPrintable(Buffer.concat(chunks).toString("utf8"))
        })
        callback()
      })
    }
  })
  const port = await new Promise<number>((resolve) =>
    smtp.listen(0, "127.0.0.1", () => resolve((smtp.server.address() as AddressInfo).port))
  )
  world = await startWorld("mail-decision", {
    env: { SVC_SMTP_URL: `smtp://127.0.0.1:${port}/?from=approvals%40svc.test` }
  })
  const settings = await world.api("PUT", "/v1/notification-settings", { reviewer_email: "alex@example.com" })
  assert.strictEqual(settings.status, 200, JSON.stringify(settings.body))
  assert.strictEqual(settings.body.reviewer_email_status, "pending")
  const allowed = await world.api("PUT", "/v1/approval-policies/crm.read", {
    mode: "allow",
    review_seconds: 60,
    expiring_notice_seconds: 0,
    timeout_action: "reject"
  })
  assert.strictEqual(allowed.status, 200)
})
afterAll(async () => {
  await world?.close()
  await new Promise<void>((resolve) => smtp ? smtp.close(() => resolve()) : resolve())
})

/** A pending approval after an allowed step, in a session of a named task; the link of its request mail. */
const pendingWithLink = async (tool: string, address = "alex@example.com") => {
  const task = await world.api("POST", "/v1/tasks", { name: "Customer refunds", answer_schema: { type: "object" } })
  const session = await world.api("POST", "/v1/agent-sessions", { task_id: task.body.id })
  const steps = `/v1/agent-sessions/${session.body.id}/steps`
  await world.api("POST", steps, {
    step_id: "find",
    tool: "crm.find-customer",
    action_class: "crm.read",
    arguments: { email: "c@example.org" }
  })
  const step = await world.api("POST", steps, {
    step_id: "refund",
    tool,
    action_class: "payments.refund",
    arguments: { order: 31, amount: 1200 }
  })
  assert.strictEqual(step.body.decision, "pending", JSON.stringify(step.body))
  const approvalId = step.body.approval_id as string
  const mail = await until(async () => mails.find((m) => m.text.includes(approvalId)), "the request mail", 30_000)
  assert.deepStrictEqual(mail.to, [address])
  const link = /(http:\/\/\S+\/console\/decide#sva_[A-Za-z0-9_-]{43})/.exec(mail.text)?.[1]
  assert.isString(link, mail.text)
  return { approvalId, link: link! }
}

/**
 * The space between each second-level heading's section and what comes
 * before it, in rem (to a tenth).
 */
const sectionGaps = (page: Page) =>
  page.evaluate(() => {
    const rem = parseFloat(getComputedStyle(document.documentElement).fontSize)
    const gaps: Record<string, number> = {}
    for (const heading of document.querySelectorAll("main h2")) {
      // A heading that opens a <section> is measured from the section's edge.
      const start = heading.parentElement?.tagName === "SECTION" && heading.previousElementSibling === null
        ? heading.parentElement
        : heading
      const before = start.previousElementSibling
      if (before === null) continue
      gaps[heading.textContent ?? ""] =
        Math.round((heading.getBoundingClientRect().top - before.getBoundingClientRect().bottom) / rem * 10) / 10
    }
    return gaps
  })

const CONFIRM_LINK = /(http:\/\/\S+\/console\/confirm-address#svr_[A-Za-z0-9_-]{43})/

/** Who-cell text of the history row, and whether it carries the reviewer mail badge. */
const historyRow = async (page: Page, tool: string) => {
  const row = page.getByRole("table", { name: "Decided and expired approvals" }).getByRole("row", {
    name: new RegExp(tool.replace(".", "\\."))
  })
  await row.waitFor()
  return row
}

describeBrowser("Deciding from the reviewer mail", () => {
  it("a new reviewer address gets a confirmation mail and no approval mail; Confirm on its page confirms it once; the Webhooks screen shows pending, then confirmed", async () => {
    const mail = await until(
      async () => mails.find((m) => m.to.includes("alex@example.com") && CONFIRM_LINK.test(m.text)),
      "the confirmation mail",
      30_000
    )
    const link = CONFIRM_LINK.exec(mail.text)![1]!
    assert.isTrue(link.startsWith(`${world.baseUrl}/console/confirm-address#`), link)

    // While pending, an approval request is not mailed.
    const task = await world.api("POST", "/v1/tasks", {
      name: "Before confirmation",
      answer_schema: { type: "object" }
    })
    const session = await world.api("POST", "/v1/agent-sessions", { task_id: task.body.id })
    const early = await world.api("POST", `/v1/agent-sessions/${session.body.id}/steps`, {
      step_id: "early",
      tool: "payments.refund-early",
      action_class: "payments.refund",
      arguments: { order: 1 }
    })
    assert.strictEqual(early.body.decision, "pending")

    const admin = await world.open()
    await signIn(admin.page, await world.link("admin", "Ada Admin"))
    await admin.page.goto(`${world.baseUrl}/console/webhooks`)
    await admin.page.getByText("pending confirmation").waitFor()
    await admin.page.getByText(
      /alex@example\.com gets no approval request until the link of its confirmation mail is opened/
    ).waitFor()
    await screenshot(admin.page, "mail-reviewer-pending")

    // A link scanner fetches the page: nothing changes.
    assert.strictEqual((await fetch(link)).status, 200)
    assert.strictEqual((await world.api("GET", "/v1/notification-settings")).body.reviewer_email_status, "pending")

    const { page, context, done } = await world.open()
    await page.goto(link)
    await page.getByRole("heading", { name: "Confirm your reviewer address" }).waitFor()
    // The token leaves the address bar once read.
    assert.strictEqual(new URL(page.url()).hash, "")
    await checkAccessibility(page, "the confirmation page")
    await screenshot(page, "mail-confirm-open")
    await page.getByRole("button", { name: "Confirm" }).click()
    await page.getByRole("heading", { name: "Address confirmed" }).waitFor()
    await page.getByText(/now receives approval requests and deadline notices/).waitFor()
    await screenshot(page, "mail-confirm-done")
    assert.deepStrictEqual(await context.cookies(), [])
    const settings = await world.api("GET", "/v1/notification-settings")
    assert.deepStrictEqual(settings.body, {
      reviewer_email: "alex@example.com",
      reviewer_email_status: "confirmed",
      email_notifier: true
    })

    // The same link again (a new load of the page): used.
    await page.goto("about:blank")
    await page.goto(link)
    await page.getByRole("button", { name: "Confirm" }).click()
    await page.getByRole("heading", { name: "Link already used" }).waitFor()
    await page.getByText("This confirmation link was already used. A link works once.").waitFor()
    await checkAccessibility(page, "a used confirmation link")
    await done()

    await admin.page.reload()
    await admin.page.getByText("alex@example.com confirmed it reads this service's mail.").waitFor()
    await admin.page.getByText("Email is active.").waitFor()
    await screenshot(admin.page, "mail-reviewer-confirmed")
    await admin.done()
    // The request made while pending was never mailed.
    assert.isFalse(mails.some((m) => m.text.includes(early.body.approval_id)))
  })

  it("the mail's link opens the approval without a sign-in; pressing Approve records email:<address>; the link then shows the final state", async () => {
    const { approvalId, link } = await pendingWithLink("payments.refund-order")
    // The link points at this server (the address it listens on, SVC_PUBLIC_URL being unset).
    assert.isTrue(link.startsWith(`${world.baseUrl}/console/decide#`), link)
    // A link scanner fetches the page: nothing changes.
    const scanned = await fetch(link)
    assert.strictEqual(scanned.status, 200)
    const { page, context, done } = await world.open()
    await page.goto(link)
    await page.getByRole("heading", { name: "Approval requested: payments.refund-order" }).waitFor()
    await page.getByText("Customer refunds").waitFor()
    await page.getByText("email:alex@example.com").waitFor()
    assert.deepStrictEqual(
      (await page.getByRole("list", { name: "Earlier steps in this session" }).getByRole("listitem").allTextContents())
        .map((text) => text.replace(/\s+/g, " ").trim()),
      ["crm.find-customer · crm.read allowed"]
    )
    // Opening it decided nothing and signed nobody in.
    assert.strictEqual((await world.api("GET", `/v1/agent-approvals/${approvalId}`)).body.status, "pending")
    assert.deepStrictEqual(await context.cookies(), [])
    await checkAccessibility(page, "the approval page of a mail link")
    // Every section of the page stands as far below the one before it, "Your decision" included.
    assert.deepStrictEqual(await sectionGaps(page), {
      Arguments: 1.5,
      "Earlier steps in this session (1)": 1.5,
      "Your decision": 1.5
    })
    await page.getByRole("textbox", { name: /Reason \(optional\)/ }).fill("Customer called; refund agreed.")
    await screenshot(page, "mail-decision-open")

    await page.getByRole("button", { name: "Approve" }).click()
    await page.getByRole("heading", { name: "Approval approved: payments.refund-order" }).waitFor()
    await page.getByText("Approved. The agent may go ahead.").waitFor()
    const record = await world.api("GET", `/v1/agent-approvals/${approvalId}`)
    assert.strictEqual(record.body.status, "approved")
    assert.strictEqual(record.body.decided_by, "email:alex@example.com")
    assert.strictEqual(record.body.decision_reason, "Customer called; refund agreed.")
    assert.strictEqual(await page.getByRole("button", { name: "Approve" }).count(), 0)
    await screenshot(page, "mail-decision-approved")

    // Opened again later: the final state, with who, when and why; no buttons.
    await page.reload()
    await page.getByRole("heading", { name: "Final state" }).waitFor()
    const final = page.locator(".final .decider-mail")
    assert.strictEqual((await final.textContent())?.replace(/\s+/g, " ").trim(), "reviewer mail alex@example.com")
    await page.getByText("Customer called; refund agreed.").waitFor()
    assert.strictEqual(await page.getByRole("button", { name: "Reject" }).count(), 0)
    assert.deepStrictEqual(await sectionGaps(page), {
      Arguments: 1.5,
      "Earlier steps in this session (1)": 1.5,
      "Final state": 1.5
    })
    // Still nobody signed in: the console itself asks for a sign-in link.
    await page.goto(`${world.baseUrl}/console/approvals`)
    await page.getByText("You are not signed in, or your session has ended.").waitFor()
    assert.deepStrictEqual(await context.cookies(), [])
    await done()
  })

  it("the mail's page answers the agent instead of running the tool; the final state shows the answer", async () => {
    const { approvalId, link } = await pendingWithLink("payments.refund-answer")
    const { page, done } = await world.open()
    await page.goto(link)
    await page.getByText("Edit the arguments, or answer instead").click()
    await page.getByRole("textbox", { name: /Answer to the agent/ }).fill(
      "Refunds above 100 go through the billing desk."
    )
    await page.getByRole("button", { name: "Reject" }).click()
    await page.getByRole("heading", { name: "Approval rejected: payments.refund-answer" }).waitFor()
    await page.getByText("Answered the agent instead of running the tool:").waitFor()
    await page.getByText("Refunds above 100 go through the billing desk.").waitFor()
    const record = await world.api("GET", `/v1/agent-approvals/${approvalId}`)
    assert.deepStrictEqual([record.body.status, record.body.response], [
      "rejected",
      "Refunds above 100 go through the billing desk."
    ])
    await checkAccessibility(page, "a mail link's approval answered")
    await screenshot(page, "mail-decision-answered")
    await done()
  })

  it("edited arguments the service refuses: said under the buttons, naming the approval and why, with the focus there", async () => {
    const { approvalId, link } = await pendingWithLink("payments.refund-edited")
    const { page, done } = await world.open()
    await page.goto(link)
    await page.getByText("Edit the arguments, or answer instead").click()
    // The action class declares no arguments schema: the service refuses edited arguments.
    await page.getByRole("textbox", { name: /Arguments to run with/ }).fill(`{"order": 31, "amount": 99}`)
    await page.getByRole("button", { name: "Approve" }).click()
    const decision = page.getByRole("region", { name: "Your decision" })
    const refusal = decision.locator(".refusal")
    await refusal.waitFor()
    assert.match(
      flat(await refusal.textContent()),
      new RegExp(`^Approve of payments\\.refund-edited \\(payments\\.refund, approval ${approvalId}\\) refused\\. \\S`)
    )
    assert.isTrue(
      await decision.evaluate((node) => node.contains(document.activeElement)),
      "the focus is at the decision"
    )
    assert.strictEqual(await page.locator("[role=status] .notice").count(), 0, "nothing at the top of the page")
    assert.strictEqual((await world.api("GET", `/v1/agent-approvals/${approvalId}`)).body.status, "pending")
    await screenshots(page, "mail-decision-refused-edit")
    await done()
  })

  it("a link whose approval was decided elsewhere meanwhile says so and shows who decided", async () => {
    const { approvalId, link } = await pendingWithLink("payments.refund-twice")
    const { page, done } = await world.open({ colorScheme: "dark", width: 390 })
    await page.goto(link)
    await page.getByRole("button", { name: "Reject" }).waitFor()
    const elsewhere = await world.api("POST", `/v1/agent-approvals/${approvalId}/decision`, {
      decision: "reject",
      reason: "Duplicate order."
    })
    assert.strictEqual(elsewhere.status, 200)
    await page.getByRole("button", { name: "Approve" }).click()
    await page.getByText("This approval was closed meanwhile; your decision was not recorded.").waitFor()
    await page.getByRole("heading", { name: "Approval rejected: payments.refund-twice" }).waitFor()
    await page.getByText("Duplicate order.").waitFor()
    const overflow = await page.evaluate(() =>
      document.documentElement.scrollWidth - document.documentElement.clientWidth
    )
    assert.isAtMost(overflow, 0)
    await checkAccessibility(page, "a closed approval's mail link, 390 px dark")
    await screenshot(page, "mail-decision-closed-390-dark")
    // The decision made elsewhere stands: the API key's, not the mail's.
    assert.match((await world.api("GET", `/v1/agent-approvals/${approvalId}`)).body.decided_by, /^[0-9a-f-]{36}$/)
    await done()
  })

  it("the console's approvals history shows a decision through a mail with a reviewer mail badge and the address", async () => {
    const { approvalId, link } = await pendingWithLink("payments.refund-history")
    const reviewer = await world.open()
    await reviewer.page.goto(link)
    await reviewer.page.getByRole("button", { name: "Reject" }).click()
    await reviewer.page.getByRole("heading", { name: "Approval rejected: payments.refund-history" }).waitFor()
    await reviewer.done()
    assert.strictEqual(
      (await world.api("GET", `/v1/agent-approvals/${approvalId}`)).body.decided_by,
      "email:alex@example.com"
    )

    const { page, done } = await world.open()
    await signIn(page, await world.link("approver", "Alex Approver"))
    await page.goto(`${world.baseUrl}/console/approvals?view=history`)
    const row = await historyRow(page, "payments.refund-history")
    const cells = (await row.getByRole("cell").allTextContents()).map((text) => text.replace(/\s+/g, " ").trim())
    assert.strictEqual(cells[3], "reviewer mail alex@example.com")
    assert.strictEqual(await row.locator(".badge.mail").count(), 1)
    assert.strictEqual(
      await row.locator(".decider-mail").getAttribute("title"),
      "Decided through the link of a reviewer mail sent to alex@example.com"
    )
    await checkAccessibility(page, "the approvals history with a mail decision")
    await screenshot(page, "mail-decision-history")
    await done()
  })

  it("a link that is not one of this service's says so", async () => {
    const { page, done } = await world.open()
    await page.goto(`${world.baseUrl}/console/decide#sva_${"x".repeat(43)}`)
    await page.getByRole("heading", { name: "Cannot open this approval" }).waitFor()
    await page.getByText("This link opens no approval of this service.").waitFor()
    await done()
  })

  it("the shared address's link shows an approval several people must approve without Approve and Reject: it names no person", async () => {
    const settings = { review_seconds: 600, expiring_notice_seconds: 0, timeout_action: "reject" }
    await world.api("PUT", "/v1/approval-policies/payments.refund", {
      mode: "require_approval",
      ...settings,
      quorum: 2
    })
    const { approvalId, link } = await pendingWithLink("payments.refund-two-people")
    await world.api("PUT", "/v1/approval-policies/payments.refund", { mode: "require_approval", ...settings })
    const { page, done } = await world.open()
    await page.goto(link)
    await page.getByRole("heading", { name: "Approval requested: payments.refund-two-people" }).waitFor()
    await page.locator(".person-required").getByText("This approval needs 2 different people to approve it.").waitFor()
    assert.strictEqual(await page.getByRole("button", { name: "Approve" }).count(), 0)
    await checkAccessibility(page, "a shared address's link of a quorum approval")
    await screenshot(page, "mail-decision-person-required")
    assert.strictEqual((await world.api("GET", `/v1/agent-approvals/${approvalId}`)).body.status, "pending")
    await done()
  })

  it("an approval assigned to a reviewer group is mailed to its member's own address, accepted by her and confirmed, not the organization's; the link's page names the member and Approve records them", async () => {
    const group = await world.api("PUT", "/v1/reviewer-groups/payments-leads", {
      members: [{ console_user: "Lena Lead", email: "lena@example.com" }]
    })
    assert.strictEqual(group.status, 200, JSON.stringify(group.body))
    assert.strictEqual(group.body.members[0].email_status, "invited")
    // The administrator only invited her: Lena accepts the address herself, signed in as herself.
    const lena = await world.open()
    await signIn(lena.page, await world.link("approver", "Lena Lead"))
    await lena.page.getByRole("navigation", { name: "Screens" }).getByRole("link", { name: "Approvals" }).click()
    await lena.page.getByRole("region", { name: "Your reviewer address" }).getByRole("button", {
      name: "Accept this address"
    }).click()
    await lena.page.getByRole("status").filter({ hasText: "You accepted lena@example.com" }).waitFor()
    await lena.done()
    const confirmation = await until(
      async () => mails.find((m) => m.to.includes("lena@example.com") && CONFIRM_LINK.test(m.text)),
      "the member's confirmation mail",
      30_000
    )
    const confirm = await world.open()
    await confirm.page.goto(CONFIRM_LINK.exec(confirmation.text)![1]!)
    await confirm.page.getByRole("button", { name: "Confirm" }).click()
    await confirm.page.getByRole("heading", { name: "Address confirmed" }).waitFor()
    await confirm.done()
    assert.strictEqual(
      (await world.api("GET", "/v1/reviewer-groups/payments-leads")).body.members[0].email_status,
      "confirmed"
    )
    const settings = { review_seconds: 600, expiring_notice_seconds: 0, timeout_action: "reject" }
    const policy = await world.api("PUT", "/v1/approval-policies/payments.refund", {
      mode: "require_approval",
      ...settings,
      group: "payments-leads"
    })
    assert.strictEqual(policy.status, 200, JSON.stringify(policy.body))
    const { approvalId, link } = await pendingWithLink("payments.refund-assigned", "lena@example.com")
    // Back to the default for the tests after this one.
    await world.api("PUT", "/v1/approval-policies/payments.refund", { mode: "require_approval", ...settings })
    const { page, done } = await world.open()
    await page.goto(link)
    await page.getByRole("heading", { name: "Approval requested: payments.refund-assigned" }).waitFor()
    await page.getByText("console:Lena Lead").first().waitFor()
    assert.strictEqual(await page.locator(".not-assigned").count(), 0)
    await checkAccessibility(page, "a member's mail link of an assigned approval")
    await screenshot(page, "mail-decision-assigned")
    await page.getByRole("button", { name: "Approve" }).click()
    await page.getByRole("heading", { name: "Approval approved: payments.refund-assigned" }).waitFor()
    const record = await world.api("GET", `/v1/agent-approvals/${approvalId}`)
    assert.deepStrictEqual([record.body.status, record.body.decided_by, record.body.assigned_group], [
      "approved",
      "console:Lena Lead",
      "payments-leads"
    ])
    assert.isFalse(
      mails.some((m) => m.to.includes("alex@example.com") && m.text.includes(approvalId)),
      "the organization's address got none of its mail"
    )
    await done()
  })

  // Last: it changes the organization's reviewer address.
  it("once the reviewer address is replaced, an earlier mail's link opens nothing and says why; the approval stays pending", async () => {
    const { approvalId, link } = await pendingWithLink("payments.refund-replaced")
    const replaced = await world.api("PUT", "/v1/notification-settings", { reviewer_email: "new-team@example.com" })
    assert.strictEqual(replaced.body.reviewer_email_status, "pending")
    const { page, done } = await world.open({ width: 390 })
    await page.goto(link)
    await page.getByRole("heading", { name: "Cannot open this approval" }).waitFor()
    await page.getByText(/The address this mail went to is no longer the organization's reviewer address/).waitFor()
    assert.strictEqual(await page.getByText("payments.refund-replaced").count(), 0, "the approval is not shown")
    assert.strictEqual(await page.getByRole("button", { name: "Approve" }).count(), 0)
    await checkAccessibility(page, "a mail link of a replaced address")
    await screenshot(page, "mail-decision-replaced-390")
    assert.strictEqual((await world.api("GET", `/v1/agent-approvals/${approvalId}`)).body.status, "pending")
    await done()
  })
})
