/**
 * The Webhooks screen's rotation control in a real browser, against a real
 * HTTPS receiver: with as many signing secrets in use as the cap allows,
 * "End every earlier secret now" rotates anyway, and the next delivery is
 * signed with the new secret alone.
 */
import { createHmac } from "node:crypto"
import { afterAll, assert, beforeAll, it } from "vitest"
import { Reply } from "../support/HttpsReceiver.ts"
import { checkAccessibility, describeBrowser, screenshot, signIn, startWorld, until, type World } from "./support.ts"

let world: World

beforeAll(async () => {
  world = await startWorld("secret-rotation")
})
afterAll(async () => {
  await world?.close()
})

/** The `v1=` digests of a delivery's `X-Svc-Signature`, and whether `secret` made one of them. */
const signatures = (
  request: { readonly headers: Record<string, string | undefined>; readonly body: Uint8Array },
  secret: string
) => {
  const header = request.headers["x-svc-signature"]!
  const t = /t=(\d+)/.exec(header)![1]!
  const digests = [...header.matchAll(/v1=([0-9a-f]+)/g)].map((m) => m[1]!)
  return {
    count: digests.length,
    byNew: digests.includes(createHmac("sha256", secret).update(`${t}.`).update(request.body).digest("hex"))
  }
}

describeBrowser("Webhooks secret rotation", () => {
  it("at the cap of signing secrets, End every earlier secret now rotates, and the new secret alone signs", async () => {
    const receiver = await world.receiver({ respond: () => Reply.status(204) })
    const created = await world.api("POST", "/v1/notification-endpoints", { url: receiver.url("/hooks/rotated") })
    assert.strictEqual(created.status, 201, JSON.stringify(created.body))
    const id = created.body.endpoint.id as string
    // Three secrets sign: the first and two rotations that each keep the one before for a day.
    for (let i = 0; i < 2; i++) {
      const rotated = await world.api("POST", `/v1/notification-endpoints/${id}/rotate-secret`, {
        overlap_seconds: 86400
      })
      assert.strictEqual(rotated.status, 200, JSON.stringify(rotated.body))
    }
    const refused = await world.api("POST", `/v1/notification-endpoints/${id}/rotate-secret`, {
      overlap_seconds: 86400
    })
    assert.strictEqual(refused.status, 409)

    const { done, page } = await world.open()
    await signIn(page, await world.link("admin", "Ada Admin"))
    await page.goto(`${world.baseUrl}/console/webhooks`)
    const card = page.getByRole("listitem").filter({ hasText: "Rotate secret" })
    await card.waitFor()
    await card.getByLabel("End every earlier secret now").check()
    assert.isTrue(await card.getByLabel("Old secret keeps working").isDisabled())
    await checkAccessibility(page, "webhooks with the end-every-earlier-secret choice")
    await screenshot(page, "webhooks-rotate-end-every-earlier-secret")

    const answer = page.waitForResponse((response) =>
      response.url().endsWith(`/v1/notification-endpoints/${id}/rotate-secret`)
    )
    await card.getByRole("button", { name: "Rotate secret" }).click()
    const rotated = await (await answer).json()
    assert.deepInclude(JSON.parse((await answer).request().postData()!), { overlap_seconds: 0, expire_previous: "all" })
    await page.getByText("Every earlier secret stopped signing").waitFor()
    await screenshot(page, "webhooks-rotated-every-earlier-secret-ended")

    const test = await world.api("POST", `/v1/notification-endpoints/${id}/test`, {})
    assert.isBelow(test.status, 300, JSON.stringify(test.body))
    const request = await until(async () => receiver.requests()[0], "the test delivery")
    assert.deepStrictEqual(signatures(request, rotated.secret as string), { count: 1, byNew: true })
    await done()
  })
})
