/**
 * The Policies screen: an admin opens the organization's policy, edits a
 * rule (its quorum and escalation chain), dry-runs the unsaved policy on a sample step and sees which rule
 * decided, saves it (the service then holds the edit), and a condition
 * that does not compile is shown next to its rule with the position the
 * service names. In light and dark, and at 390 px wide.
 */
import type { Page } from "playwright-core"
import { afterAll, assert, beforeAll, it } from "vitest"
import { assertControlsInView, screenshots } from "./layout.ts"
import { checkAccessibility, describeBrowser, screenshot, signIn, startWorld, until, type World } from "./support.ts"

let world: World

beforeAll(async () => {
  world = await startWorld("policies")
})
afterAll(async () => {
  await world?.close()
})

const ACTION_CLASS = "payments.refund"

const stored = {
  mode: "require_approval",
  review_seconds: 900,
  expiring_notice_seconds: 300,
  timeout_action: "reject",
  rules: [
    { name: "small", condition: "arguments.amount <= 100.0", result: { decision: "allow" } },
    {
      name: "huge",
      condition: "arguments.amount > 5000.0",
      result: { decision: "reject", reason: "Refunds above 5 000 go through finance." }
    }
  ]
}

const dryRun = async (page: Page, args: string) => {
  const form = page.getByRole("form", { name: "Dry run" })
  await form.getByLabel("Arguments (JSON)").fill(args)
  await form.getByRole("button", { name: "Dry run" }).click()
  const result = page.getByRole("status", { name: "Dry run result" })
  await result.locator("p").first().waitFor()
  return (await result.textContent())!.replace(/\s+/g, " ").trim()
}

describeBrowser("Policies: the rules editor and the dry run", () => {
  it("edits a rule, dry-runs the unsaved policy, saves it, and shows a bad condition's position next to its rule", async () => {
    assert.strictEqual((await world.api("PUT", `/v1/approval-policies/${ACTION_CLASS}`, stored)).status, 200)
    for (const group of ["finance", "cfo"]) {
      assert.strictEqual((await world.api("PUT", `/v1/reviewer-groups/${group}`, { members: [] })).status, 200)
    }
    const { page, done } = await world.open()
    await signIn(page, await world.link("admin", "Ada Admin"))
    await page.getByRole("navigation", { name: "Screens" }).getByRole("link", { name: "Policies" }).click()
    await page.getByRole("link", { name: ACTION_CLASS }).click()
    await page.getByRole("heading", { name: ACTION_CLASS }).waitFor()

    // The stored rules, in order.
    const rules = page.getByRole("group", { name: /^Position \d/ })
    assert.deepStrictEqual(await rules.locator("legend").allTextContents(), ["Position 1: small", "Position 2: huge"])

    // Edit: "small" now allows up to 50, and a new rule asks two people above 1 000, moved first.
    const small = page.getByRole("group", { name: "Position 1: small" })
    await small.getByLabel("Condition (CEL)").fill("arguments.amount <= 50.0")
    await page.getByRole("button", { name: "Add rule" }).click()
    const added = page.getByRole("group", { name: "Position 3: rule-3" })
    await added.getByLabel("Name").fill("large")
    await page.getByRole("group", { name: "Position 3: large" }).getByLabel("Condition (CEL)").fill(
      "arguments.amount > 1000.0"
    )
    await page.getByRole("group", { name: "Position 3: large" }).getByLabel("Quorum (approvers)").fill("2")
    // Its escalation chain: the groups in order, comma-separated.
    await page.getByRole("group", { name: "Position 3: large" }).getByLabel("Escalation seconds").fill("600")
    await page.getByRole("group", { name: "Position 3: large" }).getByLabel("Escalation chain").fill("finance, cfo")
    await page.getByRole("button", { name: "Move large up" }).click()
    await page.getByRole("button", { name: "Move large up" }).click()
    assert.deepStrictEqual(await rules.locator("legend").allTextContents(), [
      "Position 1: large",
      "Position 2: small",
      "Position 3: huge"
    ])

    // The dry run tries the edited policy, not the stored one.
    assert.strictEqual(
      await dryRun(page, `{"amount": 80}`),
      "Decided by the action class's settings: require approval (review 900 s, then reject)."
    )
    assert.strictEqual(await dryRun(page, `{"amount": 40}`), "Decided by rule small: allow.")
    assert.strictEqual(
      await dryRun(page, `{"amount": 6200}`),
      "Decided by rule large: require approval by 2 people (review 900 s, then reject)."
    )
    assert.strictEqual(
      (await world.api("POST", `/v1/approval-policies/${ACTION_CLASS}/dry-run`, {
        tool: "refund",
        arguments: { amount: 6200 }
      })).body.rule,
      "huge",
      "nothing stored before saving"
    )
    await checkAccessibility(page, "the policy editor with a dry run")
    await screenshot(page, "policies-editor")

    await page.getByRole("button", { name: "Save policy" }).click()
    await page.getByRole("status").filter({ hasText: `Policy for ${ACTION_CLASS} saved` }).waitFor()
    const saved = (await world.api("GET", "/v1/approval-policies")).body.policies[0]
    assert.deepStrictEqual(saved.rules.map((rule: { name: string }) => rule.name), ["large", "small", "huge"])
    assert.strictEqual(saved.rules[1].condition, "arguments.amount <= 50.0")
    assert.deepStrictEqual(saved.rules[0].result, {
      decision: "require_approval",
      review_seconds: 900,
      expiring_notice_seconds: 300,
      escalation_seconds: 600,
      timeout_action: "reject",
      quorum: 2,
      escalation_chain: ["finance", "cfo"]
    })

    // A condition that does not compile: the service's problem, with its position, next to that rule; nothing saved.
    const huge = page.getByRole("group", { name: "Position 3: huge" })
    await huge.getByLabel("Condition (CEL)").fill("arguments.amount >")
    await page.getByRole("button", { name: "Save policy" }).click()
    const error = huge.getByRole("alert")
    await error.waitFor()
    const text = (await error.textContent())!
    assert.match(text, /^Rule "huge": .*line 1, column \d+/)
    assert.strictEqual(await huge.getByLabel("Condition (CEL)").getAttribute("aria-invalid"), "true")
    // Under Save policy: the refusal naming the policy and why, with the focus there.
    const editor = page.getByRole("form", { name: ACTION_CLASS })
    const refusal = editor.locator(".refusal")
    await refusal.waitFor()
    assert.match(
      (await refusal.textContent())!.replace(/\s+/g, " "),
      new RegExp(`^Saving the policy for ${ACTION_CLASS.replace(/\./g, "\\.")} refused\\. .*line 1, column \\d+`)
    )
    assert.isTrue(
      await editor.evaluate((node) => node.contains(document.activeElement)),
      "the focus is in the policy's form"
    )
    assert.strictEqual(await page.locator(".notice-slot .notice.error").count(), 0, "no refusal at the top of the page")
    await screenshots(page, "policies-refused-save")
    assert.strictEqual(
      (await world.api("GET", "/v1/approval-policies")).body.policies[0].rules[2].condition,
      "arguments.amount > 5000.0"
    )
    // The dry run of the broken policy says the same, next to the same rule.
    await page.getByRole("form", { name: "Dry run" }).getByRole("button", { name: "Dry run" }).click()
    await page.getByRole("status", { name: "Dry run result" }).filter({ hasText: "The policy was refused" }).waitFor()
    await until(async () => (await huge.getByRole("alert").count()) === 1, "the rule's error after the dry run")
    await checkAccessibility(page, "the policy editor with a refused rule")
    await screenshot(page, "policies-rule-error")

    // A class without a policy: from the list, edited from the default settings and saved.
    await page.getByRole("link", { name: "All policies" }).click()
    await page.getByLabel("Action class").fill("payments.payout")
    await page.getByRole("button", { name: "Edit new policy" }).click()
    await page.getByRole("heading", { name: "payments.payout" }).waitFor()
    await page.getByText("Not saved yet").waitFor()
    await page.getByLabel("Mode").selectOption("allow")
    await page.getByRole("button", { name: "Save policy" }).click()
    await page.getByRole("status").filter({ hasText: "Policy for payments.payout saved" }).waitFor()
    const payout = (await world.api("GET", "/v1/approval-policies")).body.policies.find((p: { action_class: string }) =>
      p.action_class === "payments.payout"
    )
    assert.deepStrictEqual([payout.mode, payout.review_seconds, payout.rules], ["allow", 900, []])
    await done()

    // Dark, and a phone's width: the list and the editor.
    for (
      const [options, name] of [[{ colorScheme: "dark" as const }, "policies-dark"], [
        { width: 390 },
        "policies-390"
      ]] as const
    ) {
      const view = await world.open(options)
      await signIn(view.page, await world.link("admin", "Ada Admin"))
      await view.page.goto(`${world.baseUrl}/console/policies`)
      await view.page.getByRole("link", { name: ACTION_CLASS }).waitFor()
      await assertControlsInView(view.page, `${name}-list`)
      await screenshot(view.page, `${name}-list`)
      await view.page.goto(`${world.baseUrl}/console/policies?class=${ACTION_CLASS}`)
      await view.page.getByRole("group", { name: "Position 1: large" }).waitFor()
      assert.strictEqual(
        await dryRun(view.page, `{"amount": 6200}`),
        "Decided by rule large: require approval by 2 people (review 900 s, then reject)."
      )
      const overflow = await view.page.evaluate(() =>
        document.documentElement.scrollWidth - document.documentElement.clientWidth
      )
      assert.isAtMost(overflow, 0, "nothing wider than the window")
      await checkAccessibility(view.page, `the policy editor (${name})`)
      await screenshot(view.page, name)
      await view.done()
    }
  })
})
