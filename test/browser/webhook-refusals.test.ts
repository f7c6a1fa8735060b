/**
 * The Webhooks screen says a refusal where it happened, in a real browser:
 * a header the contract refuses is named at its row with the rule it
 * breaks (not the typed client's "Expected no excess property"), a refused
 * creation under the form, a refused rotation in the endpoint's card; each
 * time the focus moves there and nothing appears at the top of the page.
 * The endpoint list stands above the create form, and an endpoint whose
 * latest attempts fail shows its success rate over finished deliveries
 * with their counts, and the pending ones apart.
 */
import { afterAll, assert, beforeAll, it } from "vitest"
import { Reply } from "../support/HttpsReceiver.ts"
import { screenshots } from "./layout.ts"
import { checkAccessibility, describeBrowser, signIn, startWorld, until, type World } from "./support.ts"

let world: World

beforeAll(async () => {
  // One failed attempt starts a cooldown, and a failed delivery waits an hour for its retry: it stays pending.
  world = await startWorld("webhook-refusals", {
    env: { SVC_WEBHOOK_COOLDOWN_AFTER: "1", SVC_WEBHOOK_RETRY_SCHEDULE: "1h" }
  })
  const policy = await world.api("PUT", "/v1/approval-policies/deploy", {
    mode: "require_approval",
    review_seconds: 600,
    expiring_notice_seconds: 0,
    timeout_action: "reject"
  })
  assert.strictEqual(policy.status, 200, JSON.stringify(policy.body))
})
afterAll(async () => {
  await world?.close()
})

const requestApproval = async (tool: string) => {
  const session = await world.api("POST", "/v1/agent-sessions", {})
  const step = await world.api("POST", `/v1/agent-sessions/${session.body.id}/steps`, {
    step_id: tool,
    tool,
    action_class: "deploy",
    arguments: {}
  })
  assert.strictEqual(step.body.decision, "pending", JSON.stringify(step.body))
}

const flat = (text: string | null) => (text ?? "").replace(/\s+/g, " ").trim()

describeBrowser("Webhooks refusals and health", () => {
  it("refusals at their control with the focus there; the list above the form; a failing endpoint's rate over finished deliveries, pending apart", async () => {
    const receiver = await world.receiver({ respond: () => Reply.status(204) })
    const created = await world.api("POST", "/v1/notification-endpoints", {
      url: receiver.url("/hooks/flaky"),
      events: ["approval.requested"]
    })
    assert.strictEqual(created.status, 201, JSON.stringify(created.body))
    const endpoint = created.body.endpoint as { id: string; url_hint: string }
    await requestApproval("deploy-1")
    await until(
      async () => (await world.api("GET", `/v1/notification-endpoints/${endpoint.id}/stats`)).body.delivered === 1,
      "one delivered"
    )
    receiver.respond(() => Reply.status(500))
    await requestApproval("deploy-2")
    await requestApproval("deploy-3")
    await until(
      async () => {
        const list = await world.api("GET", "/v1/notification-endpoints")
        return list.body.endpoints[0]?.failing_since !== undefined
      },
      "the endpoint to be failing",
      30_000
    )
    // Three signing secrets: the cap, so a rotation keeping the latest for a day is refused.
    for (let i = 0; i < 2; i++) {
      const rotated = await world.api("POST", `/v1/notification-endpoints/${endpoint.id}/rotate-secret`, {
        overlap_seconds: 86400
      })
      assert.strictEqual(rotated.status, 200, JSON.stringify(rotated.body))
    }

    const { page, done } = await world.open()
    await signIn(page, await world.link("admin", "Ada Admin"))
    await page.goto(`${world.baseUrl}/console/webhooks`)
    const card = page.getByRole("listitem", { name: endpoint.url_hint })
    await card.waitFor()

    // The list stands above the create form.
    const listTop = (await page.getByRole("heading", { name: "Endpoints", exact: true }).boundingBox())!.y
    const formTop = (await page.getByRole("form", { name: "New endpoint" }).boundingBox())!.y
    assert.isBelow(listTop, formTop, "the endpoint list comes first")

    // Health that cannot contradict itself: the rate over finished deliveries, with its counts; pending apart.
    await until(
      async () => flat(await card.locator(".health").textContent()).includes("Pending, not in the rate2"),
      "two pending"
    )
    const health = flat(await card.locator(".health").textContent())
    assert.include(health, "Success rate of finished100 % (1 of 1)")
    assert.include(health, "2 deliveries are not finished yet: the latest attempts failed, so they wait for a retry")
    assert.match(flat(await card.getByRole("alert").first().textContent()), /Failing since/)
    await checkAccessibility(page, "a failing endpoint's health")
    await screenshots(page, "webhooks-failing-health")

    // A refused rotation: said in the card, naming the endpoint and the limit, with the focus there.
    await card.getByRole("combobox", { name: "Old secret keeps working" }).selectOption({ label: "24 hours (default)" })
    await card.getByRole("button", { name: "Rotate secret" }).click()
    const rotation = card.locator(".refusal")
    await rotation.waitFor()
    assert.match(
      flat(await rotation.textContent()),
      new RegExp(
        `^Rotating the signing secret of ${
          endpoint.url_hint.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
        } refused\\. .*SVC_WEBHOOK_MAX_SIGNING_SECRETS`
      )
    )
    assert.isTrue(await rotation.evaluate((node) => node === document.activeElement), "the focus moves to the refusal")
    assert.strictEqual(await page.locator(".notice-slot .notice").count(), 0, "nothing at the top of the page")
    await checkAccessibility(page, "a refused rotation in its card")
    await screenshots(page, "webhooks-refused-rotation")

    // A header the contract refuses: named at its row with the rule, and focused; nothing is sent.
    const form = page.getByRole("form", { name: "New endpoint" })
    await form.getByLabel("Destination URL").fill(receiver.url("/hooks/other"))
    await form.getByRole("button", { name: "Add header" }).click()
    await form.getByLabel("Header name").fill("X-Svc-Routing")
    await form.getByLabel("Value").fill("eu")
    let sent = 0
    page.on("request", (request) => {
      if (request.method() === "POST" && request.url().endsWith("/v1/notification-endpoints")) sent++
    })
    await form.getByRole("button", { name: "Create endpoint" }).click()
    const rowError = form.getByText(/^X-Svc-Routing is refused: /)
    await rowError.waitFor()
    assert.include(
      await rowError.textContent(),
      "nor one svc sets itself (Content-Type, User-Agent, Accept-Encoding, X-Svc-*, webhook-*)"
    )
    assert.notInclude(await page.content(), "Expected no excess property")
    assert.isTrue(
      await form.getByLabel("Header name").evaluate((node) => node === document.activeElement),
      "the focus moves to the refused header"
    )
    assert.strictEqual(await form.getByLabel("Header name").getAttribute("aria-invalid"), "true")
    assert.strictEqual(sent, 0, "nothing is sent")
    await screenshots(page, "webhooks-refused-header")

    // A creation the service refuses: said under the form, naming the endpoint, focused.
    await form.getByRole("button", { name: /Remove header/ }).click()
    await form.getByLabel("Destination URL").fill("https://10.1.2.3/hooks/private")
    await form.getByRole("button", { name: "Create endpoint" }).click()
    const creation = form.locator(".refusal")
    await creation.waitFor()
    assert.match(
      flat(await creation.textContent()),
      /^Creating the endpoint https:\/\/10\.1\.2\.3\/hooks\/private refused\. \S/
    )
    assert.isTrue(await creation.evaluate((node) => node === document.activeElement), "the focus moves to the refusal")
    assert.strictEqual(await page.locator(".notice-slot .notice").count(), 0, "nothing at the top of the page")
    await checkAccessibility(page, "a refused creation under its form")
    await screenshots(page, "webhooks-refused-create")
    await done()
  })
})
