/**
 * The Webhooks screen's custom headers and rate limit in a real browser,
 * against a real HTTPS receiver: an endpoint created with a header and a
 * limit shows the header's name (never its value) and the limit; editing
 * replaces the headers (values typed again) and lifts the limit; the
 * receiver gets the header on a test event.
 */
import { afterAll, assert, beforeAll, it } from "vitest"
import { Reply } from "../support/HttpsReceiver.ts"
import { checkAccessibility, describeBrowser, screenshot, signIn, startWorld, until, type World } from "./support.ts"

let world: World

beforeAll(async () => {
  world = await startWorld("webhook-headers")
})
afterAll(async () => {
  await world?.close()
})

const TOKEN = "gw-token-7c1f04d9e2"
const ROUTING = "eu-payments-31b8"

describeBrowser("Webhooks custom headers and rate limit", () => {
  it("create with a header and a limit, names shown and values never, replace the headers, lift the limit", async () => {
    const receiver = await world.receiver({ respond: () => Reply.status(204) })
    const { done, page } = await world.open()
    await signIn(page, await world.link("admin", "Ada Admin"))
    await page.goto(`${world.baseUrl}/console/webhooks`)

    const form = page.getByRole("form", { name: "New endpoint" })
    await form.getByLabel("Destination URL").fill(receiver.url("/hooks/custom"))
    await form.getByRole("button", { name: "Add header" }).click()
    await form.getByLabel("Header name").fill("X-Gateway-Token")
    await form.getByLabel("Value").fill(TOKEN)
    await form.getByLabel(/Rate limit/).fill("5")
    await form.getByRole("button", { name: "Create endpoint" }).click()
    await page.getByText("Endpoint created.").waitFor()
    // The secret dialog, if any, is dismissed by reloading: it is shown once anyway.
    await page.goto(`${world.baseUrl}/console/webhooks`)

    const card = page.getByRole("listitem").filter({ hasText: "X-Gateway-Token" })
    await card.waitFor()
    const text = (await card.textContent())!
    assert.include(text, "X-Gateway-Token (values hidden)")
    assert.include(text, "5 per second")
    assert.notInclude(await page.content(), TOKEN)
    await checkAccessibility(page, "webhooks with custom headers and a rate limit")
    await screenshot(page, "webhooks-headers-rate-limit")

    // The test event carries the header.
    await card.getByRole("button", { name: "Send test event" }).click()
    const [request] = await requestsAt(receiver, 1)
    assert.strictEqual(request!.headers["x-gateway-token"], TOKEN)

    // Replace the headers (the value typed again) and lift the limit.
    await card.getByRole("button", { name: "Edit events" }).click()
    await card.getByRole("button", { name: "Replace headers" }).click()
    await card.getByLabel("Header name").fill("X-Routing-Key")
    await card.getByLabel("Value").fill(ROUTING)
    await card.getByLabel(/Rate limit/).fill("")
    await card.getByRole("button", { name: "Save events" }).click()
    await page.getByText(/Events of .* saved\./).waitFor()
    const endpoint = await until(async () => {
      const list = await world.api("GET", "/v1/notification-endpoints")
      const found = list.body.endpoints[0]
      return found?.headers?.[0] === "X-Routing-Key" ? found : undefined
    }, "the headers to be replaced")
    assert.deepStrictEqual(endpoint.headers, ["X-Routing-Key"])
    assert.isNull(endpoint.rate_limit)
    const after = page.getByRole("listitem").filter({ hasText: "X-Routing-Key (values hidden)" })
    await after.waitFor()
    assert.include((await after.textContent())!, "unlimited")
    assert.notInclude(await page.content(), ROUTING)
    await screenshot(page, "webhooks-headers-replaced")
    await done()
  })
})

/** The receiver's first `count` requests (polled: the receiver records them as they arrive). */
const requestsAt = async (receiver: Awaited<ReturnType<World["receiver"]>>, count: number) =>
  until(
    async () => receiver.requests().length >= count ? receiver.requests() : undefined,
    `${count} request(s) at the receiver`
  )
