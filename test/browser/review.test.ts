/**
 * "Review" and "Promote" in a real browser,
 * and the time from opening a sign-in link to a usable review queue.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, assert, beforeAll, it } from "vitest"
import { assertControlsInView, screenshots } from "./layout.ts"
import {
  checkAccessibility,
  describeBrowser,
  screenshot,
  screenshotDir,
  signIn,
  startWorld,
  until,
  type World
} from "./support.ts"

let world: World

beforeAll(async () => {
  world = await startWorld("review")
})
afterAll(async () => {
  await world?.close()
})

const answerSchema = {
  type: "object",
  properties: {
    category: { type: "string" },
    priority: { type: "integer" },
    notes: { type: "string" },
    tags: { type: "array", items: { type: "string" } }
  },
  required: ["category"]
}

const newTask = async (name: string) => {
  const task = await world.api("POST", "/v1/tasks", { name, answer_schema: answerSchema })
  assert.strictEqual(task.status, 201, JSON.stringify(task.body))
  return task.body.id as string
}

/** A logged run and a correction of its answer: the feedback item. */
const correction = async (taskId: string, input: unknown, answer: unknown, corrected: unknown) => {
  const run = await world.api("POST", `/v1/tasks/${taskId}/runs`, { input, answer })
  assert.strictEqual(run.status, 201, JSON.stringify(run.body))
  const feedback = await world.api("POST", "/v1/feedback", {
    inference_log_id: run.body.trace_id,
    score: -1,
    correction: corrected
  })
  assert.strictEqual(feedback.status, 201, JSON.stringify(feedback.body))
  return feedback.body as { id: string; redaction_warning?: { fields: Array<string> } }
}

const statusOf = async (id: string, taskId: string) => {
  const listed = await world.api("GET", `/v1/feedback?task_id=${taskId}&limit=100`)
  return (listed.body.feedback as Array<{ id: string; status: string }>).find((item) => item.id === id)?.status
}

describeBrowser("Review", () => {
  it("the queue, the structural diff, the redaction warning, keys s/r/j/k/? and the cheatsheet; link to usable queue measured", async () => {
    const taskId = await newTask("support-triage")
    const first = await correction(taskId, { ticket: "Refund please" }, { category: "sales", priority: 2 }, {
      category: "billing",
      priority: 2,
      tags: ["refund"]
    })
    const second = await correction(taskId, { ticket: "Login broken" }, { category: "auth", priority: 1 }, {
      category: "auth",
      priority: 1,
      notes: `customer pasted ${world.adminKey}`
    })
    assert.deepStrictEqual(second.redaction_warning?.fields, ["correction.notes"])

    const link = await world.link("reviewer", "Rita Reviewer")
    const { page, done } = await world.open()
    const started = Date.now()
    await page.goto(link)
    await page.getByRole("button", { name: "Sign in" }).click()
    const queue = page.getByRole("list", { name: "Corrections" })
    await queue.waitFor()
    await page.getByRole("button", { name: "Stage" }).waitFor()
    const linkToQueueMs = Date.now() - started
    fs.mkdirSync(screenshotDir, { recursive: true })
    fs.writeFileSync(path.join(screenshotDir, "link-to-queue.json"), JSON.stringify({ linkToQueueMs }) + "\n")
    console.log(`link to usable review queue: ${linkToQueueMs} ms`)

    // Oldest last: the newest correction is first in the queue.
    const items = queue.getByRole("button")
    assert.strictEqual(await items.count(), 2)
    const detail = page.getByRole("article", { name: "Selected correction" })
    await detail.getByRole("note", { name: "Redaction warning" }).waitFor()
    assert.include(await detail.getByRole("note", { name: "Redaction warning" }).textContent(), "correction.notes")
    await detail.getByText("Login broken").waitFor()
    await screenshot(page, "review-redaction")

    // j moves to the next correction, k back.
    await page.keyboard.press("j")
    await detail.getByText("Refund please").waitFor()
    const changes = detail.getByRole("table")
    await changes.waitFor()
    const rows = await changes.getByRole("row").allTextContents()
    assert.include(rows.join("\n"), "$.categorychanged\"sales\"\"billing\"")
    assert.include(rows.join("\n"), "$.tagsadded")
    await checkAccessibility(page, "the review queue")
    await screenshot(page, "review")
    await page.keyboard.press("k")
    await detail.getByText("Login broken").waitFor()

    // ? opens the cheatsheet, built from the same table as the handlers.
    await page.keyboard.press("?")
    const sheet = page.getByRole("dialog", { name: "Keyboard shortcuts" })
    await sheet.waitFor()
    const keys = await sheet.locator("kbd").allTextContents()
    assert.deepStrictEqual(keys, ["s", "r", "j", "k", "?"])
    await checkAccessibility(page, "the cheatsheet")
    await screenshot(page, "review-cheatsheet")
    await page.keyboard.press("Escape")
    await sheet.waitFor({ state: "hidden" })

    // r rejects the selected (redacted) one; s stages the next.
    await page.keyboard.press("r")
    await page.getByRole("status").getByText("Rejected.").waitFor()
    await until(async () => (await statusOf(second.id, taskId)) === "rejected", "the rejection")
    await detail.getByText("Refund please").waitFor()
    await page.keyboard.press("s")
    await page.getByText("the queue is empty").waitFor()
    assert.strictEqual(await statusOf(first.id, taskId), "staged")
    // The records name the session's person.
    await done()
  })

  it("filters live in the URL and survive a reload", async () => {
    const taskId = await newTask("filters")
    const item = await correction(taskId, { q: "x" }, { category: "a" }, { category: "b" })
    await world.api("POST", `/v1/feedback/${item.id}/stage`)
    const { page, done } = await world.open()
    await signIn(page, await world.link("reviewer", "Rita Reviewer"))
    await page.getByRole("combobox", { name: "Task" }).selectOption({ label: "filters" })
    await page.getByRole("combobox", { name: "Status" }).selectOption("staged")
    await until(async () => new URL(page.url()).search.includes("status=staged"), "the URL")
    const url = new URL(page.url())
    assert.strictEqual(url.searchParams.get("task"), taskId)
    await page.reload()
    await page.getByRole("list", { name: "Corrections" }).getByText("staged").waitFor()
    assert.strictEqual(await page.getByRole("combobox", { name: "Status" }).inputValue(), "staged")
    assert.strictEqual(await page.getByRole("list", { name: "Corrections" }).getByRole("button").count(), 1)
    await done()
  })

  it("a correction decided elsewhere meanwhile: the refusal in its card, naming it, focused; it leaves the queue on moving on", async () => {
    const taskId = await newTask("elsewhere")
    const other = await correction(taskId, { q: "x" }, { category: "a" }, { category: "b" })
    const item = await correction(taskId, { q: "y" }, { category: "a" }, { category: "c" })
    const { page, done } = await world.open()
    await signIn(page, await world.link("reviewer", "Rita Reviewer"))
    await page.goto(`${world.baseUrl}/console/review?task=${taskId}`)
    const detail = page.getByRole("article", { name: "Selected correction" })
    await detail.getByText(item.id).waitFor()
    const elsewhere = await world.api("POST", `/v1/feedback/${item.id}/reject`)
    assert.strictEqual(elsewhere.status, 200)
    const answered = page.waitForResponse((response) => response.url().endsWith(`/v1/feedback/${item.id}/stage`))
    await detail.getByRole("button", { name: "Stage" }).click()
    assert.strictEqual((await answered).status(), 409)
    const refusal = detail.locator(".refusal")
    await refusal.waitFor()
    assert.strictEqual(
      (await refusal.textContent())?.replace(/\s+/g, " ").trim(),
      `Stage of correction ${item.id} (elsewhere) refused. Someone decided this correction meanwhile (it is rejected now); nothing was changed, and it leaves the queue when you move on.Dismiss`
    )
    assert.isTrue(
      await detail.evaluate((node) => node.contains(document.activeElement)),
      "the focus is in the correction's card"
    )
    assert.strictEqual(await page.locator(".notice-slot .notice").count(), 0, "nothing at the top of the page")
    // The card says what the correction is now, and offers no Stage or Reject.
    await detail.getByText("rejected", { exact: true }).waitFor()
    assert.strictEqual(await detail.getByRole("button", { name: "Stage" }).count(), 0)
    await checkAccessibility(page, "a refused stage in its card")
    await screenshots(page, "review-refused-stage")
    // Moving on: the other correction, and the decided one has left the queue.
    await page.keyboard.press("j")
    await detail.getByText(other.id).waitFor()
    assert.strictEqual(await page.getByRole("list", { name: "Corrections" }).getByRole("button").count(), 1)
    assert.strictEqual(await page.locator(".refusal").count(), 0)
    await done()
  })

  it("reads well at 390 px and in dark mode", async () => {
    const taskId = await newTask("narrow")
    await correction(taskId, { ticket: "A long ticket text that wraps on a phone screen" }, {
      category: "x",
      priority: 3
    }, { category: "y", priority: 1, tags: ["a", "b"] })
    for (
      const [colorScheme, width, name] of [["dark", 1280, "review-dark"], ["light", 390, "review-390"], [
        "dark",
        390,
        "review-390-dark"
      ]] as const
    ) {
      const { page, done } = await world.open({ colorScheme, width })
      await signIn(page, await world.link("reviewer", "Rita Reviewer"))
      await page.goto(`${world.baseUrl}/console/review?task=${taskId}`)
      await page.getByRole("button", { name: "Stage" }).waitFor()
      const overflow = await page.evaluate(() =>
        document.documentElement.scrollWidth - document.documentElement.clientWidth
      )
      assert.isAtMost(overflow, 0, `no horizontal scrolling at ${width} px`)
      const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor)
      assert.strictEqual(background, colorScheme === "dark" ? "rgb(15, 18, 22)" : "rgb(255, 255, 255)")
      await checkAccessibility(page, name)
      await assertControlsInView(page, name)
      await screenshot(page, name)
      await done()
    }
  })
})

describeBrowser("Promote", () => {
  const stageNew = async (taskId: string, n: number) => {
    const item = await correction(taskId, { n }, { category: "old" }, { category: `new-${n}` })
    const staged = await world.api("POST", `/v1/feedback/${item.id}/stage`)
    assert.strictEqual(staged.status, 200)
    return item.id
  }

  it("recovers from FEEDBACK_CHANGED and DATASET_BASE_CHANGED: reloads the preview, shows what changed, promotes on confirmation", async () => {
    const taskId = await newTask("promotion")
    await stageNew(taskId, 1)
    const { page, done } = await world.open()
    await signIn(page, await world.link("admin", "Ada Admin"))
    await page.goto(`${world.baseUrl}/console/promote?task=${taskId}`)
    const promote = page.getByRole("button", { name: "Promote", exact: true })
    await page.getByRole("list", { name: "Staged corrections" }).getByRole("listitem").first().waitFor()
    await checkAccessibility(page, "the promote preview")
    await screenshot(page, "promote-preview")

    // Someone stages another correction after the preview loaded.
    await stageNew(taskId, 2)
    let answered = page.waitForResponse((response) =>
      response.url().endsWith("/feedback/promote") && response.request().method() === "POST"
    )
    await promote.click()
    let response = await answered
    assert.strictEqual(response.status(), 409)
    assert.strictEqual((await response.json()).code, "FEEDBACK_CHANGED")
    const changed = page.getByRole("alert", { name: "What changed" })
    await changed.waitFor()
    assert.include(await changed.textContent(), "1 staged correction added")
    // The refusal under the button, naming the task and why, with the focus there.
    const promotion = page.locator(".promotion")
    const refusal = promotion.locator(".refusal")
    await refusal.waitFor()
    assert.strictEqual(
      (await refusal.textContent())?.replace(/\s+/g, " ").trim(),
      "Promote of promotion refused. The preview changed since you loaded it; nothing was promoted. Check the new preview and press Promote again to confirm.Dismiss"
    )
    assert.isTrue(
      await promotion.evaluate((node) => node.contains(document.activeElement)),
      "the focus is at the promotion"
    )
    assert.strictEqual(await page.locator(".notice-slot .notice.error").count(), 0, "no refusal at the top of the page")
    await screenshots(page, "promote-refused")
    assert.strictEqual(await page.getByRole("list", { name: "Staged corrections" }).getByRole("listitem").count(), 2)
    await promote.click()
    await page.getByText("Promoted 2 corrections: dataset version 2 now has 2 examples.").waitFor()
    await screenshot(page, "promote-done")

    // Nothing staged now: the button is disabled and says why.
    await page.getByText("Nothing staged for this task").waitFor()
    assert.isTrue(await promote.isDisabled())

    // The dataset moves on under the preview: another promotion through the API.
    await stageNew(taskId, 3)
    await page.reload()
    await page.getByRole("list", { name: "Staged corrections" }).getByRole("listitem").first().waitFor()
    const preview = await world.api("GET", `/v1/tasks/${taskId}/feedback/promote/preview`)
    const elsewhere = await world.api("POST", `/v1/tasks/${taskId}/feedback/promote`, {
      base_dataset_id: preview.body.base_dataset_id,
      expected_feedback_revision: preview.body.expected_feedback_revision
    })
    assert.strictEqual(elsewhere.status, 201)
    await stageNew(taskId, 4)
    answered = page.waitForResponse((response) =>
      response.url().endsWith("/feedback/promote") && response.request().method() === "POST"
    )
    await promote.click()
    response = await answered
    assert.strictEqual(response.status(), 409)
    assert.strictEqual((await response.json()).code, "DATASET_BASE_CHANGED")
    await changed.waitFor()
    const text = await until(async () => {
      const now = await changed.textContent()
      return now?.includes("version 3") ? now : undefined
    }, "the versions in what changed")
    assert.include(text, "the dataset moved on from version 2 to version 3")
    assert.include(text, "1 staged correction added")
    assert.include(text, "1 staged correction no longer staged")
    await promote.click()
    await page.getByText("Promoted 1 correction: dataset version 4 now has 4 examples.").waitFor()
    await done()
  })
})
