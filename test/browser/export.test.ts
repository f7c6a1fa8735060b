/**
 * The Promote screen's downloads: a version promoted in the console and
 * each listed version download as JSON Lines with the console session's
 * credentials, and the file is the export the API describes.
 */
import crypto from "node:crypto"
import * as fs from "node:fs"
import type { Page } from "playwright-core"
import { afterAll, assert, beforeAll, it } from "vitest"
import { screenshots } from "./layout.ts"
import { checkAccessibility, describeBrowser, signIn, startWorld, type World } from "./support.ts"

let world: World

beforeAll(async () => {
  world = await startWorld("export")
})
afterAll(async () => {
  await world?.close()
})

const answerSchema = { type: "object", properties: { category: { type: "string" } }, required: ["category"] }

/** Clicks a download link and answers the saved file's bytes and suggested name. */
const downloadVia = async (page: Page, link: ReturnType<Page["getByRole"]>) => {
  const [download] = await Promise.all([page.waitForEvent("download", { timeout: 15_000 }), link.click()])
  const file = await download.path()
  return { bytes: fs.readFileSync(file), name: download.suggestedFilename() }
}

describeBrowser("Promote: download a version as JSON Lines", () => {
  it("promotes, then downloads the new version from the notice and from the list of versions, with the session's cookie", async () => {
    const task = await world.api("POST", "/v1/tasks", { name: "export", answer_schema: answerSchema })
    assert.strictEqual(task.status, 201)
    const taskId = task.body.id as string
    const feedbackIds: Array<string> = []
    for (const n of [1, 2, 3]) {
      const run = await world.api("POST", `/v1/tasks/${taskId}/runs`, {
        input: { ticket: `ticket ${n}` },
        answer: { category: "old" }
      })
      const item = await world.api("POST", "/v1/feedback", {
        inference_log_id: run.body.trace_id,
        score: -1,
        correction: { category: `new-${n}` }
      })
      assert.strictEqual(item.status, 201, JSON.stringify(item.body))
      assert.strictEqual((await world.api("POST", `/v1/feedback/${item.body.id}/stage`)).status, 200)
      feedbackIds.push(item.body.id)
    }

    const { page, done } = await world.open()
    await signIn(page, await world.link("admin", "Ada Admin"))
    await page.goto(`${world.baseUrl}/console/promote?task=${taskId}`)
    const versions = page.getByRole("table", { name: "Dataset versions" })
    await versions.getByRole("link", { name: "Download version 1 as JSON Lines" }).waitFor()
    await page.getByRole("button", { name: "Promote", exact: true }).click()
    const notice = page.getByRole("status")
    const fromNotice = notice.getByRole("link", { name: "Download version 2 as JSON Lines" })
    await fromNotice.waitFor()
    const fromList = versions.getByRole("link", { name: "Download version 2 as JSON Lines" })
    await fromList.waitFor()
    await checkAccessibility(page, "the promote screen with its versions")
    await screenshots(page, "export-promote")

    const first = await downloadVia(page, fromNotice)
    assert.match(first.name, /^dataset-[0-9a-f-]{36}-v2\.jsonl$/)
    const lines = first.bytes.toString("utf8").split("\n")
    assert.strictEqual(lines.pop(), "", "the file ends with a newline")
    const examples = lines.map((line) => JSON.parse(line))
    assert.deepStrictEqual(
      examples,
      [1, 2, 3].map((n, i) => ({
        input: { ticket: `ticket ${n}` },
        answer: { category: `new-${n}` },
        feedback_id: feedbackIds[i]
      }))
    )

    // The same bytes from the list, and the digest the API sends for them.
    const second = await downloadVia(page, fromList)
    assert.isTrue(second.bytes.equals(first.bytes))
    const { datasets } = (await world.api("GET", `/v1/tasks/${taskId}/datasets`)).body
    const exported = await fetch(`${world.baseUrl}/v1/datasets/${datasets[1].id}/export`, {
      headers: { authorization: `Bearer ${world.adminKey}` }
    })
    assert.strictEqual(
      exported.headers.get("repr-digest"),
      `sha-256=:${crypto.createHash("sha256").update(first.bytes).digest("base64")}:`
    )

    // The first version is empty: its file is too.
    const empty = await downloadVia(page, versions.getByRole("link", { name: "Download version 1 as JSON Lines" }))
    assert.strictEqual(empty.bytes.byteLength, 0)
    await done()
  })
})
