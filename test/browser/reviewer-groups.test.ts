/**
 * The Reviewers screen: an admin creates a reviewer group with a console
 * person (with an address, shown as an invitation the person accepts) and an API
 * key, removes a member, sees the problems the form names (a bad group
 * name, a key that is not the organization's), cannot delete a group a
 * policy names (the API's reason shown) and deletes it once no policy
 * does; delegates to someone else, sees it listed and ends it. A person
 * without `org_config.write` is not offered the screen. In light and dark,
 * and at 390 px wide. The invited person accepts their address themselves
 * on the Approvals screen.
 */
import type { Page } from "playwright-core"
import { afterAll, assert, beforeAll, it } from "vitest"
import { assertControlsInView, screenshots } from "./layout.ts"
import { checkAccessibility, describeBrowser, screenshot, signIn, startWorld, until, type World } from "./support.ts"

let world: World
let keyId: string
let nightKey: string

const settings = { mode: "require_approval", review_seconds: 600, expiring_notice_seconds: 0, timeout_action: "reject" }

beforeAll(async () => {
  world = await startWorld("reviewer-groups")
  const key = await world.api("POST", "/v1/api-keys", { name: "night-shift", scopes: ["approvals.decide"] })
  assert.strictEqual(key.status, 201, JSON.stringify(key.body))
  keyId = key.body.api_key.id
  nightKey = key.body.key
})
afterAll(async () => {
  await world?.close()
})

const openReviewers = async (page: Page) => {
  await page.getByRole("navigation", { name: "Screens" }).getByRole("link", { name: "Reviewers" }).click()
  await page.getByRole("heading", { name: "Reviewers", level: 1 }).waitFor()
}

const groupCard = (page: Page, name: string) => page.getByRole("listitem", { name })

describeBrowser("Reviewers: groups, member addresses and delegations", () => {
  it("creates a group with two members, shows the invited address, edits and deletes it, naming every problem", async () => {
    const { page, done } = await world.open()
    await signIn(page, await world.link("admin", "Ada Admin"))
    await openReviewers(page)
    await page.getByText("No reviewer groups yet.").waitFor()

    // A bad name: the form names the field and what the contract expects; nothing is stored.
    const form = page.getByRole("form", { name: "New reviewer group" })
    await form.getByLabel("Name", { exact: true }).fill("payments leads!")
    await form.getByRole("group", { name: "Member 1" }).getByLabel("Console person's name").fill("Ana Lima")
    await form.getByRole("button", { name: "Create group" }).click()
    const problems = form.getByRole("alert").filter({ hasText: "The group was not saved" })
    await problems.waitFor()
    assert.match((await problems.textContent())!, /Name \(name\): Expected 1 to 64 letters/)
    assert.strictEqual(await form.getByLabel("Name", { exact: true }).getAttribute("aria-invalid"), "true")
    assert.deepStrictEqual((await world.api("GET", "/v1/reviewer-groups")).body.groups, [])
    await checkAccessibility(page, "the new group form with a problem")
    await screenshot(page, "reviewers-bad-name")

    // Two members: Ana with her address, and the night-shift key.
    await form.getByLabel("Name", { exact: true }).fill("payments-leads")
    await form.getByRole("group", { name: "Member 1" }).getByLabel("Address (optional)").fill("ana@example.com")
    await form.getByRole("button", { name: "Add another member" }).click()
    const second = form.getByRole("group", { name: "Member 2" })
    await second.getByLabel("Kind").selectOption("key_id")
    await second.getByLabel("API key id").fill(keyId)
    await form.getByRole("button", { name: "Create group" }).click()
    await page.getByRole("status").filter({
      hasText: "Group payments-leads saved with 2 members; 1 address is an invitation: each person accepts theirs."
    }).waitFor()
    assert.strictEqual(await problems.count(), 0)

    const card = groupCard(page, "payments-leads")
    const ana = card.getByRole("row").filter({ hasText: "Ana Lima" })
    await ana.getByText("ana@example.com").waitFor()
    await ana.getByText("invited: waiting for the person to accept").waitFor()
    const key = card.getByRole("row").filter({ hasText: keyId })
    await key.getByText("no address").waitFor()
    const stored = (await world.api("GET", "/v1/reviewer-groups/payments-leads")).body
    assert.sameDeepMembers(stored.members, [
      { console_user: "Ana Lima", email: "ana@example.com", email_status: "invited" },
      { key_id: keyId, email: null, email_status: null }
    ])
    await checkAccessibility(page, "a group with an invited address")
    await screenshot(page, "reviewers-group")

    // A key that is not the organization's: the API's 404, naming the member's field, next to the add form.
    const add = card.getByRole("form", { name: "Add a member to payments-leads" })
    await add.getByLabel("Kind").selectOption("key_id")
    await add.getByLabel("API key id").fill("0193b7a2-6f1e-7c3a-9a55-2f4e8c1d0b17")
    await add.getByRole("button", { name: "Add member" }).click()
    const refused = add.getByRole("alert").filter({ hasText: "The member was not added" })
    await refused.waitFor()
    assert.match(
      (await refused.textContent())!,
      /Member 3, API key \(members\[2\]\.key_id\): No active API key of the organization/
    )
    assert.strictEqual(await add.getByLabel("API key id").getAttribute("aria-invalid"), "true")
    await screenshot(page, "reviewers-unknown-key")

    // Remove the key: Ana stays, her address untouched (still invited).
    await card.getByRole("button", { name: `Remove API key ${keyId} from payments-leads` }).click()
    // Said in the group's card, where its controls are; nothing at the top of the page.
    await card.getByRole("status").filter({ hasText: `API key ${keyId} removed from payments-leads.` }).waitFor()
    assert.notInclude(await page.locator(".notice-slot").first().textContent(), "removed from")
    await screenshots(page, "reviewers-member-removed")
    await key.waitFor({ state: "detached" })
    assert.deepStrictEqual((await world.api("GET", "/v1/reviewer-groups/payments-leads")).body.members, [
      { console_user: "Ana Lima", email: "ana@example.com", email_status: "invited" }
    ])

    // Give the remaining member a new address: an invitation again, until she accepts and confirms it.
    await card.getByRole("button", { name: "Change address of Ana Lima" }).click()
    const editor = card.getByRole("form", { name: "New address of Ana Lima" })
    assert.strictEqual(
      await editor.getByLabel("New address of Ana Lima").evaluate((input) => input === document.activeElement),
      true
    )
    await editor.getByLabel("New address of Ana Lima").fill("ana.lima@")
    await editor.getByRole("button", { name: "Save address" }).click()
    const wrong = card.getByRole("alert").filter({ hasText: "payments-leads was not changed" })
    await wrong.waitFor()
    assert.match((await wrong.textContent())!, /Member 1, address \(members\[0\]\.email\): Expected an email address/)
    assert.strictEqual(await editor.getByLabel("New address of Ana Lima").getAttribute("aria-invalid"), "true")
    await checkAccessibility(page, "a member's address being changed")
    await screenshot(page, "reviewers-change-address")
    await editor.getByLabel("New address of Ana Lima").fill("ana.lima@example.com")
    await editor.getByRole("button", { name: "Save address" }).click()
    await card.getByRole("status").filter({
      hasText:
        "Ana Lima is invited to use this address: it gets approval mail once they accept it themselves and confirm it."
    }).waitFor()
    await ana.getByText("ana.lima@example.com").waitFor()
    await ana.getByText("invited: waiting for the person to accept").waitFor()

    // Clear Ana's address.
    await card.getByRole("button", { name: "Clear address of Ana Lima" }).click()
    await card.getByRole("status").filter({ hasText: "Address of Ana Lima cleared" }).waitFor()
    await ana.getByText("no address").waitFor()

    // A policy names the group: the API refuses the deletion and the card says why.
    const policy = await world.api("PUT", "/v1/approval-policies/payments.payout", {
      ...settings,
      group: "payments-leads"
    })
    assert.strictEqual(policy.status, 200, JSON.stringify(policy.body))
    await card.getByRole("button", { name: "Delete group payments-leads" }).click()
    await page.getByRole("dialog", { name: "Delete the group payments-leads?" }).getByRole("button", {
      name: "Delete group"
    }).click()
    const inUse = card.getByRole("alert").filter({ hasText: "payments-leads was not changed" })
    await inUse.waitFor()
    assert.include(
      await inUse.textContent(),
      "A policy names this group, or a pending approval is assigned to it: change those first."
    )
    await checkAccessibility(page, "a group in use")
    await screenshot(page, "reviewers-group-in-use")

    // Once no policy names it, it goes.
    assert.strictEqual((await world.api("PUT", "/v1/approval-policies/payments.payout", settings)).status, 200)
    await card.getByRole("button", { name: "Delete group payments-leads" }).click()
    await page.getByRole("dialog", { name: "Delete the group payments-leads?" }).getByRole("button", {
      name: "Delete group"
    }).click()
    await page.getByRole("status").filter({ hasText: "Group payments-leads deleted." }).waitFor()
    await page.getByText("No reviewer groups yet.").waitFor()
    assert.strictEqual((await world.api("GET", "/v1/reviewer-groups/payments-leads")).status, 404)
    await done()
  })

  it("delegates to someone else for a window, lists it by names, refuses a delegation to oneself, and ends it", async () => {
    // A key's delegation, named by the key's name (which the API gives with it), not only by its id.
    const fromKey = await world.api("POST", "/v1/reviewer-delegations", {
      delegate: { console_user: "Ada Admin" },
      ends_at: new Date(Date.now() + 86_400_000).toISOString()
    }, nightKey)
    assert.strictEqual(fromKey.status, 200, JSON.stringify(fromKey.body))
    const { page, done } = await world.open()
    await signIn(page, await world.link("admin", "Ada Admin"))
    await openReviewers(page)
    const form = page.getByRole("form", { name: "New delegation" })
    await form.getByText("From: Ada Admin").waitFor()

    // To oneself: the API's 400 names the field.
    await form.getByLabel("Console person's name").fill("Ada Admin")
    await form.getByRole("button", { name: "Delegate" }).click()
    const refused = form.getByRole("alert").filter({ hasText: "Not delegated" })
    await refused.waitFor()
    assert.match((await refused.textContent())!, /Delegate to \(delegate\): A person cannot delegate to themselves\./)
    assert.isTrue(
      await refused.evaluate((node) => node.contains(document.activeElement)),
      "the focus moves to the form's problems"
    )

    await form.getByLabel("Console person's name").fill("Ben Backup")
    await form.getByLabel("Ends").fill("2099-01-01T09:00")
    await form.getByRole("button", { name: "Delegate" }).click()
    const tooLong = form.getByRole("alert").filter({ hasText: "Not delegated" })
    await tooLong.waitFor()
    assert.match((await tooLong.textContent())!, /Ends \(ends_at\): /)

    const ends = await page.evaluate(() => {
      const date = new Date(Date.now() + 3 * 86_400_000)
      const pad = (n: number) => String(n).padStart(2, "0")
      return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${
        pad(date.getMinutes())
      }`
    })
    await form.getByLabel("Ends").fill(ends)
    await form.getByRole("button", { name: "Delegate" }).click()
    // Said under its Delegate button, not at the top of the page.
    await form.getByRole("status").filter({ hasText: "Delegated to Ben Backup until" }).waitFor()
    assert.notInclude(await page.locator(".notice-slot").first().textContent(), "Delegated")
    const row = page.getByRole("table", { name: "Delegations" }).getByRole("row").filter({ hasText: "Ben Backup" })
    await row.getByText("Ada Admin").waitFor()
    const keyRow = page.getByRole("table", { name: "Delegations" }).getByRole("row").filter({ hasText: keyId })
    assert.strictEqual(
      (await keyRow.getByRole("cell").first().textContent())?.replace(/\s+/g, " ").trim(),
      `night-shift (API key)${keyId}`,
      "the key by its name, then its id"
    )
    const listed = (await world.api("GET", "/v1/reviewer-delegations")).body.delegations.filter((
      d: { delegation_id: string }
    ) => d.delegation_id !== fromKey.body.delegation_id)
    assert.deepStrictEqual(listed.map((d: { delegator: unknown; delegate: unknown }) => [d.delegator, d.delegate]), [[{
      console_user: "Ada Admin"
    }, { console_user: "Ben Backup" }]])
    assert.strictEqual(
      Math.abs(Date.parse(listed[0].ends_at) - (Date.parse(listed[0].starts_at) + 3 * 86_400_000)) < 120_000,
      true
    )
    await checkAccessibility(page, "a delegation")
    await screenshots(page, "reviewers-delegation")

    const keyEnds = await world.api(
      "POST",
      `/v1/reviewer-delegations/${fromKey.body.delegation_id}/end`,
      undefined,
      nightKey
    )
    assert.strictEqual(keyEnds.status, 200, JSON.stringify(keyEnds.body))
    await row.getByRole("button", { name: "End delegation to Ben Backup" }).click()
    await page.getByRole("dialog", { name: "End this delegation now?" }).getByRole("button", { name: "End delegation" })
      .click()
    await page.getByRole("status").filter({ hasText: "Delegation to Ben Backup ended" }).waitFor()
    await page.getByText("No delegations under way or to come.").waitFor()
    assert.deepStrictEqual((await world.api("GET", "/v1/reviewer-delegations")).body.delegations, [])
    await done()
  })

  it("an invited person accepts their own address on the Approvals screen; only then is it pending confirmation", async () => {
    const invited = await world.api("PUT", "/v1/reviewer-groups/night", {
      members: [{ console_user: "Nia Night", email: "nia@example.com" }]
    })
    assert.strictEqual(invited.body.members[0].email_status, "invited")
    const { page, done } = await world.open()
    await signIn(page, await world.link("approver", "Nia Night"))
    await page.getByRole("navigation", { name: "Screens" }).getByRole("link", { name: "Approvals" }).click()
    const own = page.getByRole("region", { name: "Your reviewer address" })
    await own.getByText("invited by an administrator: not yours until you accept it").waitFor()
    await checkAccessibility(page, "an invited reviewer address")
    await screenshot(page, "own-address-invited")
    await own.getByRole("button", { name: "Accept this address" }).click()
    await page.getByRole("status").filter({ hasText: "You accepted nia@example.com" }).waitFor()
    await own.getByText("waiting for you to confirm it from the mail sent there").waitFor()
    const group = (await world.api("GET", "/v1/reviewer-groups/night")).body
    assert.deepStrictEqual(group.members, [{
      console_user: "Nia Night",
      email: "nia@example.com",
      email_status: "pending"
    }])
    await done()
  })

  it("is offered only with org_config.write; reads well in dark and at 390 px", async () => {
    assert.strictEqual(
      (await world.api("PUT", "/v1/reviewer-groups/finance", {
        members: [{ console_user: "Fay Finance", email: "fay@example.com" }]
      })).status,
      200
    )
    const approver = await world.open()
    await signIn(approver.page, await world.link("approver", "Omar Approver"))
    assert.strictEqual(
      await approver.page.getByRole("navigation", { name: "Screens" }).getByRole("link", { name: "Reviewers" }).count(),
      0
    )
    await approver.page.goto(`${world.baseUrl}/console/reviewers`)
    await approver.page.getByText("This screen needs the org_config.write scope.").waitFor()
    await approver.done()

    for (
      const [options, name] of [[{ colorScheme: "dark" as const }, "reviewers-dark"], [
        { width: 390 },
        "reviewers-390"
      ]] as const
    ) {
      const view = await world.open(options)
      await signIn(view.page, await world.link("admin", "Ada Admin"))
      await openReviewers(view.page)
      await groupCard(view.page, "finance").getByText("invited: waiting for the person to accept").waitFor()
      await until(
        async () => (await view.page.getByText("No delegations under way or to come.").count()) === 1,
        "the delegations"
      )
      const overflow = await view.page.evaluate(() =>
        document.documentElement.scrollWidth - document.documentElement.clientWidth
      )
      assert.isAtMost(overflow, 0, "nothing wider than the window")
      await checkAccessibility(view.page, `the Reviewers screen (${name})`)
      await assertControlsInView(view.page, name)
      await screenshot(view.page, name)
      await view.done()
    }
  })
})
