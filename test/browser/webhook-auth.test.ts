/**
 * The Webhooks screen's Authentication section in a real browser, against a
 * real token server and a real receiver that wants the token and a client
 * certificate from the test CA: an endpoint created with OAuth client
 * credentials and a pasted certificate shows the client id, the token
 * endpoint's hint and the certificate's subject (never the secret or the
 * key); its test event reaches the receiver with the bearer token over
 * mutual TLS; editing with "None" removes it.
 */
import { Effect } from "effect"
import { afterAll, assert, beforeAll, it } from "vitest"
import { Reply } from "../support/HttpsReceiver.ts"
import { TestTls } from "../support/tls.ts"
import { checkAccessibility, describeBrowser, screenshot, signIn, startWorld, until, type World } from "./support.ts"

let world: World

beforeAll(async () => {
  world = await startWorld("webhook-auth")
})
afterAll(async () => {
  await world?.close()
})

const CLIENT_SECRET = "cs-browser-4e9a1d7c52"
const TOKEN = "at-browser-b83f0e6a19"

describeBrowser("Webhooks endpoint authentication", () => {
  it("create with OAuth client credentials and a client certificate, hints shown and secrets never, test event over mTLS, remove", async () => {
    const tls = await Effect.runPromise(TestTls.shared)
    const client = await tls.issueClient("svc-browser-client")
    const tokens = await world.receiver({
      respond: () => Reply.json({ access_token: TOKEN, token_type: "Bearer", expires_in: 3600 })
    })
    const receiver = await world.receiver({
      clientCa: tls.caCert,
      respond: (request) =>
        request.headers["authorization"] === `Bearer ${TOKEN}` && request.clientCertificate === "svc-browser-client"
          ? Reply.status(204)
          : Reply.status(401)
    })
    const { done, page } = await world.open()
    await signIn(page, await world.link("admin", "Ada Admin"))
    await page.goto(`${world.baseUrl}/console/webhooks`)

    const form = page.getByRole("form", { name: "New endpoint" })
    await form.getByLabel("Destination URL").fill(receiver.url("/hooks/guarded"))
    await form.getByRole("radio", { name: "Both" }).check()
    await form.getByLabel("Token URL").fill(tokens.url("/oauth/token"))
    await form.getByLabel("Client ID").fill("svc-browser")
    await form.getByLabel("Client secret").fill(CLIENT_SECRET)
    await form.getByLabel("Scope (optional)").fill("webhooks.write")
    await form.getByLabel("Client certificate (PEM)").fill(client.cert)
    await form.getByLabel("Private key (PEM, unencrypted)").fill(client.key)
    await screenshot(page, "webhooks-auth-form")
    await form.getByRole("button", { name: "Create endpoint" }).click()
    await page.getByText("Endpoint created.").waitFor()
    await page.goto(`${world.baseUrl}/console/webhooks`)

    const card = page.getByRole("listitem").filter({ hasText: "svc-browser" })
    await card.waitFor()
    const text = (await card.textContent())!
    assert.include(text, `OAuth 2.0 client credentials (client svc-browser, token endpoint ${tokens.url("/…")})`)
    assert.include(text, "client certificate CN=svc-browser-client, expires")
    const content = await page.content()
    for (const hidden of [CLIENT_SECRET, TOKEN, client.key.split("\n")[1]!, "/oauth/token"]) {
      assert.notInclude(content, hidden)
    }
    await checkAccessibility(page, "webhooks with endpoint authentication")
    await screenshot(page, "webhooks-auth-card")

    await card.getByRole("button", { name: "Send test event" }).click()
    const request = await until(async () => receiver.requests().at(0), "the test event at the receiver")
    assert.strictEqual(request.headers["authorization"], `Bearer ${TOKEN}`)
    assert.strictEqual(request.clientCertificate, "svc-browser-client")
    assert.match(request.headers["x-svc-signature"]!, /^t=\d+,v1=/)

    await card.getByRole("button", { name: "Edit events" }).click()
    await card.getByRole("button", { name: "Replace authentication" }).click()
    await card.getByRole("radio", { name: "OAuth 2.0 client credentials" }).check()
    await screenshot(page, "webhooks-auth-edit")
    await card.getByRole("radio", { name: "None (signatures only)" }).check()
    await card.getByRole("button", { name: "Save events" }).click()
    await page.getByText(/Events of .* saved\./).waitFor()
    const endpoint = await until(async () => {
      const list = await world.api("GET", "/v1/notification-endpoints")
      const found = list.body.endpoints[0]
      return found?.auth === null ? found : undefined
    }, "the authentication to be removed")
    assert.isNull(endpoint.tls_client_certificate)
    await page.getByRole("listitem").filter({ hasText: "none (signatures only)" }).waitFor()
    await done()
  })
})
