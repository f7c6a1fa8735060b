/**
 * `GET /docs` (the API reference, a large third-party bundle on the
 * console's origin) renders under a Content-Security-Policy of its own: its
 * own scripts only, in a sandbox of its own, never framed.
 */
import * as path from "node:path"
import { afterAll, assert, beforeAll, it } from "vitest"
import { CONSOLE_CSP } from "../../src/server/Console.ts"
import { describeBrowser, screenshot, screenshotDir, startWorld, takingShots, type World } from "./support.ts"

let world: World

beforeAll(async () => {
  world = await startWorld("docs")
})
afterAll(async () => {
  await world?.close()
})

describeBrowser("the API reference at /docs", () => {
  it("carries its own CSP (its scripts by hash, sandboxed, frame-ancestors 'none', connecting nowhere), renders the reference with no violation, and offers no API client (Test Request) it could not send", async () => {
    const response = await fetch(`${world.baseUrl}/docs`)
    assert.strictEqual(response.status, 200)
    const csp = response.headers.get("content-security-policy") ?? ""
    assert.notStrictEqual(csp, CONSOLE_CSP)
    assert.match(csp, /frame-ancestors 'none'/)
    assert.match(csp, /default-src 'none'/)
    assert.match(csp, /script-src( 'sha256-[A-Za-z0-9+/]+=*')+(;|$)/)
    assert.notMatch(csp, /unsafe-eval|script-src[^;]*unsafe-inline/)
    assert.match(csp, /sandbox allow-scripts allow-popups(;|$)/)
    assert.strictEqual(response.headers.get("x-frame-options"), "DENY")
    const { page, problems, done } = await world.open()
    await page.goto(`${world.baseUrl}/docs`)
    // Scalar built the reference: the operations and the groups of the document are on the page.
    await page.getByRole("heading", { name: "Check liveness" }).first().waitFor({ timeout: 30_000 })
    await page.getByRole("heading", { name: "Datasets" }).first().waitFor()
    await screenshot(page, "docs")
    if (takingShots) await page.screenshot({ path: path.join(screenshotDir, "docs-first-screen.png") })
    // The page connects nowhere, so it offers no request it could not send.
    const text = await page.evaluate(() => document.body.innerText)
    assert.notMatch(text, /test request|api client|developer tools/i)
    // The page runs in an opaque origin: not the console's.
    assert.strictEqual(await page.evaluate(() => window.origin), "null")
    assert.deepStrictEqual(problems, [])
    await done()
  })
})
