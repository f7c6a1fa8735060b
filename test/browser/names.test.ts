/**
 * Things with the same name told apart, and keys by name, in a real
 * browser: two tasks named alike are distinct in the Review and Promote
 * task choices and in the Review queue, whose rows also differ by when each
 * correction came and the end of its id; the API keys screen shows each
 * key's id (to match a key named elsewhere by id) and names the key that
 * made another.
 */
import { afterAll, assert, beforeAll, it } from "vitest"
import { screenshots } from "./layout.ts"
import { checkAccessibility, describeBrowser, signIn, startWorld, type World } from "./support.ts"

let world: World

beforeAll(async () => {
  world = await startWorld("names")
})
afterAll(async () => {
  await world?.close()
})

const newTask = async (name: string) => {
  const task = await world.api("POST", "/v1/tasks", { name, answer_schema: { type: "object" } })
  assert.strictEqual(task.status, 201, JSON.stringify(task.body))
  return task.body.id as string
}

const correction = async (taskId: string, n: number) => {
  const run = await world.api("POST", `/v1/tasks/${taskId}/runs`, { input: { n }, answer: { category: "old" } })
  assert.strictEqual(run.status, 201, JSON.stringify(run.body))
  const feedback = await world.api("POST", "/v1/feedback", {
    inference_log_id: run.body.trace_id,
    score: -1,
    correction: { category: "new" }
  })
  assert.strictEqual(feedback.status, 201, JSON.stringify(feedback.body))
  return feedback.body.id as string
}

const flat = (text: string | null) => (text ?? "").replace(/\s+/g, " ").trim()

describeBrowser("Names told apart", () => {
  it("two tasks of one name differ in the task choices and the queue's rows differ", async () => {
    const first = await newTask("support-triage")
    const second = await newTask("support-triage")
    const ids = [await correction(first, 1), await correction(first, 2), await correction(second, 3)]
    const { page, done } = await world.open()
    await signIn(page, await world.link("admin", "Ada Admin"))
    await page.goto(`${world.baseUrl}/console/review?status=all`)
    await page.getByRole("combobox", { name: "Task" }).getByRole("option", { name: new RegExp(second.slice(-8)) })
      .waitFor({ state: "attached" })
    const options = (await page.getByRole("combobox", { name: "Task" }).getByRole("option").allTextContents()).filter((
      text
    ) => text !== "All tasks")
    assert.lengthOf(options, 2)
    assert.notStrictEqual(options[0], options[1])
    for (
      const [option, id] of [[options.find((o) => o.includes(first.slice(-8)))!, first], [
        options.find((o) => o.includes(second.slice(-8)))!,
        second
      ]]
    ) {
      assert.match(option!, new RegExp(`^support-triage \\(created .*, id …${id!.slice(-8)}\\)$`))
    }
    const rows = page.getByRole("list", { name: "Corrections" }).getByRole("button")
    await rows.nth(2).waitFor()
    const texts = (await rows.allTextContents()).map(flat)
    assert.strictEqual(new Set(texts).size, 3, `every row differs: ${texts.join(" | ")}`)
    for (const id of ids) {
      assert.isTrue(texts.some((text) => text.includes(id.slice(-8))), `a row shows the end of ${id}`)
    }
    await checkAccessibility(page, "the review queue with tasks of one name")
    await screenshots(page, "review-same-names")

    await page.goto(`${world.baseUrl}/console/promote`)
    await page.getByRole("combobox", { name: "Task" }).getByRole("option", { name: new RegExp(second.slice(-8)) })
      .waitFor({ state: "attached" })
    const promoteOptions = await page.getByRole("combobox", { name: "Task" }).getByRole("option").allTextContents()
    assert.deepStrictEqual(new Set(promoteOptions), new Set(options))
    await done()
  })

  it("the API keys screen shows each key's id and names the key that made another", async () => {
    const maker = await world.api("POST", "/v1/api-keys", {
      name: "deploy-bot",
      scopes: ["keys.manage", "agents.read"]
    })
    assert.strictEqual(maker.status, 201, JSON.stringify(maker.body))
    const made = await world.api("POST", "/v1/api-keys", { name: "reader", scopes: ["agents.read"] }, maker.body.key)
    assert.strictEqual(made.status, 201, JSON.stringify(made.body))
    const { page, done } = await world.open()
    await signIn(page, await world.link("admin", "Ada Admin"))
    await page.goto(`${world.baseUrl}/console/keys`)
    const row = page.getByRole("row", { name: /reader/ })
    await row.waitFor({ timeout: 10_000 }).catch(async (error) => {
      throw new Error(`${String(error)}\n${flat(await page.locator("main").textContent())}`)
    })
    const cells = (await row.getByRole("cell").allTextContents()).map(flat)
    assert.strictEqual(cells[0], `reader${made.body.api_key.id}`, "the key's name and id")
    assert.strictEqual(
      cells[4],
      `deploy-bot (API key)${maker.body.api_key.id}`,
      "made by the key named deploy-bot, with its id"
    )
    const makerRow = page.getByRole("row", { name: /deploy-bot/ }).first()
    assert.include(flat(await makerRow.textContent()), maker.body.api_key.id)
    await checkAccessibility(page, "API keys with ids")
    await screenshots(page, "api-keys-ids")
    await done()
  })
})
