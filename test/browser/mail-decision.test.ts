/**
 * Deciding from the reviewer mail in a real browser: svc mails a reviewer
 * through an SMTP server on loopback; the link in the mail opens the
 * approval's page without a sign-in; opening it decides nothing; pressing
 * Approve records `email:<reviewer address>`; afterwards the link shows the
 * final state.
 */
import type { AddressInfo } from "node:net"
import type { Page } from "playwright-core"
import { SMTPServer } from "smtp-server"
import { afterAll, assert, beforeAll, it } from "vitest"
import { checkAccessibility, describeBrowser, screenshot, startWorld, until, type World } from "./support.ts"

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
        mails.push({ to: session.envelope.rcptTo.map((r) => r.address), text: decodeQuotedPrintable(Buffer.concat(chunks).toString("utf8")) })
        callback()
      })
    }
  })
  const port = await new Promise<number>((resolve) => smtp.listen(0, "127.0.0.1", () => resolve((smtp.server.address() as AddressInfo).port)))
  world = await startWorld("mail-decision", { env: { SVC_SMTP_URL: `smtp://127.0.0.1:${port}/?from=approvals%40svc.test` } })
  const settings = await world.api("PUT", "/v1/notification-settings", { reviewer_email: "alex@example.com" })
  assert.strictEqual(settings.status, 200, JSON.stringify(settings.body))
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
const pendingWithLink = async (tool: string) => {
  const task = await world.api("POST", "/v1/tasks", { name: "Customer refunds", answer_schema: { type: "object" } })
  const session = await world.api("POST", "/v1/agent-sessions", { task_id: task.body.id })
  const steps = `/v1/agent-sessions/${session.body.id}/steps`
  await world.api("POST", steps, { step_id: "find", tool: "crm.find-customer", action_class: "crm.read", arguments: { email: "c@example.org" } })
  const step = await world.api("POST", steps, { step_id: "refund", tool, action_class: "payments.refund", arguments: { order: 31, amount: 1200 } })
  assert.strictEqual(step.body.decision, "pending", JSON.stringify(step.body))
  const approvalId = step.body.approval_id as string
  const mail = await until(async () => mails.find((m) => m.text.includes(approvalId)), "the request mail", 30_000)
  assert.deepStrictEqual(mail.to, ["alex@example.com"])
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
      const start = heading.parentElement?.tagName === "SECTION" && heading.previousElementSibling === null ? heading.parentElement : heading
      const before = start.previousElementSibling
      if (before === null) continue
      gaps[heading.textContent ?? ""] = Math.round((heading.getBoundingClientRect().top - before.getBoundingClientRect().bottom) / rem * 10) / 10
    }
    return gaps
  })

describeBrowser("Deciding from the reviewer mail", () => {
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
    assert.deepStrictEqual(await sectionGaps(page), { Arguments: 1.5, "Earlier steps in this session (1)": 1.5, "Your decision": 1.5 })
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
    await page.getByText("alex@example.com (mail link)").waitFor()
    await page.getByText("Customer called; refund agreed.").waitFor()
    assert.strictEqual(await page.getByRole("button", { name: "Reject" }).count(), 0)
    assert.deepStrictEqual(await sectionGaps(page), { Arguments: 1.5, "Earlier steps in this session (1)": 1.5, "Final state": 1.5 })
    // Still nobody signed in: the console itself asks for a sign-in link.
    await page.goto(`${world.baseUrl}/console/approvals`)
    await page.getByText("You are not signed in, or your session has ended.").waitFor()
    assert.deepStrictEqual(await context.cookies(), [])
    await done()
  })

  it("a link whose approval was decided elsewhere meanwhile says so and shows who decided", async () => {
    const { approvalId, link } = await pendingWithLink("payments.refund-twice")
    const { page, done } = await world.open({ colorScheme: "dark", width: 390 })
    await page.goto(link)
    await page.getByRole("button", { name: "Reject" }).waitFor()
    const elsewhere = await world.api("POST", `/v1/agent-approvals/${approvalId}/decision`, { decision: "reject", reason: "Duplicate order." })
    assert.strictEqual(elsewhere.status, 200)
    await page.getByRole("button", { name: "Approve" }).click()
    await page.getByText("This approval was closed meanwhile; your decision was not recorded.").waitFor()
    await page.getByRole("heading", { name: "Approval rejected: payments.refund-twice" }).waitFor()
    await page.getByText("Duplicate order.").waitFor()
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)
    assert.isAtMost(overflow, 0)
    await checkAccessibility(page, "a closed approval's mail link, 390 px dark")
    await screenshot(page, "mail-decision-closed-390-dark")
    // The decision made elsewhere stands: the API key's, not the mail's.
    assert.match((await world.api("GET", `/v1/agent-approvals/${approvalId}`)).body.decided_by, /^[0-9a-f-]{36}$/)
    await done()
  })

  it("a link that is not one of this service's says so", async () => {
    const { page, done } = await world.open()
    await page.goto(`${world.baseUrl}/console/decide#sva_${"x".repeat(43)}`)
    await page.getByRole("heading", { name: "Cannot open this approval" }).waitFor()
    await page.getByText("This link opens no approval of this service.").waitFor()
    await done()
  })
})
