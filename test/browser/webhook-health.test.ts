/**
 * The Webhooks screen's health view in a real browser, against real HTTPS
 * receivers: per endpoint the last 24 hours' statistics, a banner while it
 * is disabled or failing, "Send test event", and a bulk "Replay failed
 * since…" that shows the dry-run count before it queues anything.
 */
import { Effect } from "effect"
import { afterAll, assert, beforeAll, it } from "vitest"
import { Reply } from "../support/HttpsReceiver.ts"
import { checkAccessibility, describeBrowser, screenshot, signIn, startWorld, until, type World } from "./support.ts"

let world: World

beforeAll(async () => {
  // Short cooldowns, so replayed deliveries of a failing endpoint go out within the test.
  world = await startWorld("webhook-health", {
    env: { SVC_WEBHOOK_COOLDOWN_BASE: "1s", SVC_WEBHOOK_COOLDOWN_MAX: "2s" }
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

const endpointNamed = async (id: string) =>
  (await world.api("GET", "/v1/notification-endpoints")).body.endpoints.find((e: any) => e.id === id)

describeBrowser("Webhooks health", () => {
  it("statistics per endpoint, banners for disabled and failing endpoints, a test event, and a bulk replay counted before it queues", async () => {
    const healthy = await world.receiver({ respond: () => Reply.status(204) })
    const failing = await world.receiver({ respond: () => Reply.status(500) })
    const gone = await world.receiver({ respond: () => Reply.status(410) })
    const create = async (url: string) => {
      const created = await world.api("POST", "/v1/notification-endpoints", { url, events: ["approval.requested"] })
      assert.strictEqual(created.status, 201, JSON.stringify(created.body))
      return created.body.endpoint as { id: string; url_hint: string }
    }
    const healthyEndpoint = await create(healthy.url("/hooks/healthy"))
    const failingEndpoint = await create(failing.url("/hooks/failing"))
    const goneEndpoint = await create(gone.url("/hooks/gone"))
    // Two events: four failed attempts at the failing endpoint (it is failing from the third on).
    await requestApproval("deploy-1")
    await requestApproval("deploy-2")
    await until(
      async () => (await endpointNamed(failingEndpoint.id))?.failing_since !== undefined,
      "the endpoint to be failing",
      30_000
    )
    await until(
      async () => (await endpointNamed(goneEndpoint.id))?.active === false,
      "the 410 to disable the endpoint",
      30_000
    )
    await until(
      async () => {
        const log = await world.api("GET", `/v1/notification-endpoints/${failingEndpoint.id}/deliveries`)
        return log.body.deliveries.length === 2 && log.body.deliveries.every((d: any) => d.status === "failed")
      },
      "both deliveries to fail for good",
      30_000
    )
    await until(
      async () =>
        (await world.api("GET", `/v1/notification-endpoints/${healthyEndpoint.id}/stats`)).body.delivered === 2,
      "two delivered"
    )

    const { page, done } = await world.open()
    await signIn(page, await world.link("admin", "Ada Admin"))
    await page.goto(`${world.baseUrl}/console/webhooks`)
    const card = (endpoint: { url_hint: string }) => page.getByRole("listitem", { name: endpoint.url_hint })

    // Statistics of the last 24 hours.
    const healthyCard = card(healthyEndpoint)
    await healthyCard.getByRole("heading", { name: "Last 24 hours" }).waitFor()
    const healthyStats = healthyCard.getByRole("definition")
    await until(async () => (await healthyCard.textContent())!.includes("100 %"), "the healthy endpoint's success rate")
    assert.include(await healthyStats.allTextContents().then((all) => all.join("|")), "2")
    assert.strictEqual(await healthyCard.getByRole("alert").count(), 0, "no banner on a healthy endpoint")
    // Each card reads its own statistics: the failing one's may come after the healthy one's.
    await until(
      async () => (await card(failingEndpoint).textContent())!.includes("0 %"),
      "the failing endpoint's success rate"
    )

    // Banners.
    const disabled = card(goneEndpoint).getByRole("alert")
    await disabled.waitFor()
    assert.match((await disabled.textContent())!, /Disabled.*the receiver answered 410 Gone/)
    const failingBanner = card(failingEndpoint).getByRole("alert")
    await failingBanner.waitFor()
    assert.match((await failingBanner.textContent())!, /Failing since/)
    await checkAccessibility(page, "webhooks with statistics and banners")
    await screenshot(page, "webhooks-health")

    // A test event: answered on screen with what the receiver did.
    const before = healthy.requests().length
    await healthyCard.getByRole("button", { name: "Send test event" }).click()
    await page.getByText(/Test event delivered to .*: the receiver answered 204 in \d+ ms\./).waitFor()
    const test = JSON.parse(Buffer.from(healthy.requests()[before]!.body).toString("utf8"))
    assert.strictEqual(test.test, true)
    await card(failingEndpoint).getByRole("button", { name: "Send test event" }).click()
    await page.getByText(/Test event not accepted by .*: HTTP 500\./).waitFor()
    await screenshot(page, "webhooks-test-failed")

    // Bulk replay: the count first, then the replay.
    const failingCard = card(failingEndpoint)
    await failingCard.getByRole("combobox", { name: "Replay failed since" }).selectOption({ label: "the last hour" })
    await failingCard.getByRole("button", { name: "Count failed" }).click()
    await failingCard.getByText(/2 failed deliveries since .*; 2 fit the queue now\./).waitFor()
    const unchanged = await world.api("GET", `/v1/notification-endpoints/${failingEndpoint.id}/deliveries`)
    assert.deepStrictEqual(
      unchanged.body.deliveries.filter((d: any) => !d.label.startsWith("test ")).map((d: any) => [d.status, d.replays]),
      [["failed", 0], ["failed", 0]],
      "counting queues nothing"
    )
    await screenshot(page, "webhooks-replay-count")
    failing.respond(() => Reply.status(204))
    const sent = failing.requests().length
    await failingCard.getByRole("button", { name: "Replay these 2" }).click()
    await page.getByText("2 failed deliveries queued again.").waitFor()
    await Effect.runPromise(failing.waitForRequests(sent + 2, "30 seconds"))
    await until(
      async () => {
        const log = await world.api("GET", `/v1/notification-endpoints/${failingEndpoint.id}/deliveries`)
        return log.body.deliveries.filter((d: any) => !d.label.startsWith("test ")).every((d: any) =>
          d.status === "delivered" && d.replays === 1
        )
      },
      "the replayed deliveries to be delivered",
      30_000
    )
    // Recovered: after a reload the banner is gone.
    await page.reload()
    await failingCard.getByRole("heading", { name: "Last 24 hours" }).waitFor()
    await until(async () => (await failingCard.getByRole("alert").count()) === 0, "the failing banner to go")
    await screenshot(page, "webhooks-recovered")
    await done()
  })
})
