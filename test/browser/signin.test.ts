/**
 * The console served by svc, sign-in links and sessions, in a real browser.
 */
import { afterAll, assert, beforeAll, it } from "vitest"
import { CONSOLE_CSP } from "../../src/server/Console.ts"
import { checkAccessibility, describeBrowser, screenshot, signIn, startWorld, type World } from "./support.ts"

let world: World

beforeAll(async () => {
  world = await startWorld("signin")
})
afterAll(async () => {
  await world?.close()
})

describeBrowser("the console is served by svc itself", () => {
  it("GET / redirects to /console/; console pages carry the strict CSP; assets are ours alone", async () => {
    const root = await fetch(`${world.baseUrl}/`, { redirect: "manual" })
    assert.strictEqual(root.status, 302)
    assert.strictEqual(root.headers.get("location"), "/console/")
    for (const route of ["/console/", "/console/review?task=x", "/console/sign-in"]) {
      const page = await fetch(`${world.baseUrl}${route}`)
      assert.strictEqual(page.status, 200, route)
      assert.strictEqual(page.headers.get("content-security-policy"), CONSOLE_CSP)
      assert.match(CONSOLE_CSP, /default-src 'self'/)
      assert.match(CONSOLE_CSP, /frame-ancestors 'none'/)
      const html = await page.text()
      assert.notMatch(html, /<script>|<style|style=|https?:\/\//, "no inline script or style, no absolute URL")
    }
    for (const missing of ["/console/assets/nope.js", "/console/assets/.hidden", "/console/assets/a/b.js"]) {
      assert.strictEqual((await fetch(`${world.baseUrl}${missing}`)).status, 404, missing)
    }
    const { page, done } = await world.open()
    await page.goto(`${world.baseUrl}/`)
    assert.strictEqual(new URL(page.url()).pathname, "/console/")
    await page.getByRole("heading", { name: "svc console" }).waitFor()
    await page.getByText("You are not signed in").waitFor()
    await checkAccessibility(page, "the signed-out page")
    await done()
  })
})

describeBrowser("sign-in links", () => {
  it("a link signs in only after the person presses \"Sign in\"; used again, it is refused with a page that says so", async () => {
    const link = await world.signInLink("reviewer", "Rita Reviewer")
    const token = new URL(link).hash.slice(1)
    const first = await world.open()
    // Opening the page (as a link preview would) does not use the link.
    await first.page.goto(link)
    await first.page.getByRole("button", { name: "Sign in" }).waitFor()
    await screenshot(first.page, "sign-in")
    await checkAccessibility(first.page, "the sign-in page")
    // The secret leaves the address bar once read.
    assert.strictEqual(new URL(first.page.url()).hash, "")
    const preview = await world.open()
    await preview.page.goto(link)
    await preview.page.getByRole("button", { name: "Sign in" }).waitFor()
    await preview.done()

    await first.page.getByRole("button", { name: "Sign in" }).click()
    await first.page.getByRole("navigation", { name: "Screens" }).waitFor()
    await first.page.waitForURL((url) => url.pathname === "/console/review")
    await first.page.getByText("Rita Reviewer · reviewer").waitFor()

    const again = await world.open()
    await again.page.goto(link)
    await again.page.getByRole("button", { name: "Sign in" }).click()
    await again.page.getByRole("heading", { name: "Link already used" }).waitFor()
    await screenshot(again.page, "sign-in-used")
    await checkAccessibility(again.page, "the used-link page")
    // A refused sign-in is an answer the page expected, not an error.
    await again.done()
    await first.done()
    // The link's secret never reaches the server's log.
    assert.notInclude(world.server.output(), token)
  })

  it("an expired link shows a page saying so", async () => {
    const link = await world.signInLink("reviewer", "Late Larry", ["--ttl", "1m"])
    // The minute passes (the link's deadline moves into the past). The
    // server stops for the statement, so the page opens only afterwards: a
    // page open meanwhile may load something (Chromium fetches the favicon
    // whenever it likes) and a refused load counts as a page error.
    await world.sql("UPDATE console_links SET expires_at = now() - interval '1 second' WHERE used_at IS NULL")
    const { page, done } = await world.open()
    await page.goto(link)
    await page.getByRole("button", { name: "Sign in" }).click()
    await page.getByRole("heading", { name: "Link expired" }).waitFor()
    await done()
  })

  it("\"Sign out\" ends the session: the cookie no longer authenticates", async () => {
    const { context, page, done } = await world.open()
    await signIn(page, await world.link("reviewer", "Olga Out"))
    const [cookie] = await context.cookies()
    assert.isDefined(cookie)
    assert.isTrue(cookie!.httpOnly)
    assert.strictEqual(cookie!.sameSite, "Strict")
    await page.getByRole("button", { name: "Sign out" }).click()
    await page.getByText("You are not signed in").waitFor()
    const after = await fetch(`${world.baseUrl}/v1/console/session`, {
      headers: { cookie: `${cookie!.name}=${cookie!.value}` }
    })
    assert.strictEqual(after.status, 401)
    await done()
  })
})

describeBrowser("presets and scopes", () => {
  it("a reviewer sees no admin screens, opening one by URL says which scope is missing, and promote answers 403", async () => {
    const task = await world.api("POST", "/v1/tasks", { name: "triage", answer_schema: { type: "object" } })
    assert.strictEqual(task.status, 201)
    const { page, done } = await world.open()
    await signIn(page, await world.link("reviewer", "Rita Reviewer"))
    const nav = page.getByRole("navigation", { name: "Screens" })
    assert.deepStrictEqual(await nav.getByRole("link").allTextContents(), ["Review"])
    for (
      const [path, label, scope] of [
        ["/console/promote", "Promote", "datasets.write"],
        ["/console/webhooks", "Webhooks", "org_config.write"],
        ["/console/telemetry", "Telemetry", "org_config.write"],
        ["/console/policies", "Policies", "org_config.write"],
        ["/console/keys", "API keys", "keys.manage"],
        ["/console/approvals", "Approvals", "approvals.decide"]
      ] as const
    ) {
      await page.goto(`${world.baseUrl}${path}`)
      await page.getByRole("heading", { name: label }).waitFor()
      const alert = page.getByRole("alert")
      await alert.waitFor()
      assert.include(await alert.textContent(), scope)
    }
    await screenshot(page, "reviewer-missing-scope")
    // The same request the Promote button makes, with the reviewer's session: 403 naming the scope.
    const answer = await page.evaluate(async (taskId) => {
      const response = await fetch(`/v1/tasks/${taskId}/feedback/promote`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-svc-console": "1" },
        body: JSON.stringify({
          base_dataset_id: "00000000-0000-4000-8000-000000000000",
          expected_feedback_revision: "0"
        })
      })
      return { status: response.status, body: await response.json() }
    }, task.body.id as string)
    assert.strictEqual(answer.status, 403)
    assert.strictEqual(answer.body.code, "INSUFFICIENT_SCOPE")
    assert.strictEqual(answer.body.required_scope, "datasets.write")
    await done()
  })

  it("a cross-site state-changing request with the session cookie is refused; one without the console header too", async () => {
    const task = await world.api("POST", "/v1/tasks", { name: "csrf", answer_schema: { type: "object" } })
    const run = await world.api("POST", `/v1/tasks/${task.body.id}/runs`, { input: { q: 1 }, answer: { a: 1 } })
    const feedback = await world.api("POST", "/v1/feedback", {
      inference_log_id: run.body.trace_id,
      score: -1,
      correction: { a: 2 }
    })
    assert.strictEqual(feedback.status, 201)
    const { context, page, done } = await world.open()
    await signIn(page, await world.link("reviewer", "Rita Reviewer"))
    const [cookie] = await context.cookies()
    const stage = `${world.baseUrl}/v1/feedback/${feedback.body.id}/stage`
    const cookieHeader = `${cookie!.name}=${cookie!.value}`
    // What a page on another site could make a browser send: the cookie, its own Origin.
    const crossSite = await fetch(stage, {
      method: "POST",
      headers: {
        cookie: cookieHeader,
        origin: "https://evil.example",
        "sec-fetch-site": "cross-site",
        "x-svc-console": "1"
      }
    })
    assert.strictEqual(crossSite.status, 403)
    assert.strictEqual((await crossSite.json()).code, "CROSS_SITE_REQUEST")
    // A plain HTML form cannot send the console header: refused even from the console's own page.
    const formLike = await page.evaluate(async (url) => (await fetch(url, { method: "POST" })).status, stage)
    assert.strictEqual(formLike, 403)
    const still = await world.api("GET", `/v1/feedback?task_id=${task.body.id}`)
    assert.strictEqual(still.body.feedback[0].status, "pending")
    await done()
  })
})
