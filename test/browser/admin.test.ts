/**
 * The admin screens in a real browser: "Webhooks"
 * against a real HTTPS receiver, "Telemetry" against a real HTTPS
 * collector, "API keys" and console sessions.
 */
import { Effect } from "effect"
import { afterAll, assert, beforeAll, it } from "vitest"
import { Reply } from "../support/HttpsReceiver.ts"
import { decodeOtlp } from "../support/Otlp.ts"
import { assertControlsInView, screenshots } from "./layout.ts"
import {
  checkAccessibility,
  describeBrowser,
  flat,
  type Guarded,
  resumePolling,
  screenshot,
  signIn,
  startWorld,
  stopPolling,
  until,
  type World
} from "./support.ts"

let world: World

beforeAll(async () => {
  world = await startWorld("admin")
  const policy = await world.api("PUT", "/v1/approval-policies/deploy", {
    mode: "require_approval",
    review_seconds: 600,
    expiring_notice_seconds: 0,
    timeout_action: "reject"
  })
  assert.strictEqual(policy.status, 200, JSON.stringify(policy.body))
})
afterAll(async () => {
  await world?.close()
})

const admin = async (options?: { colorScheme?: "light" | "dark"; width?: number }): Promise<Guarded> => {
  const guarded = await world.open(options)
  await signIn(guarded.page, await world.link("admin", "Ada Admin"))
  return guarded
}

const requestApproval = async (tool: string) => {
  const session = await world.api("POST", "/v1/agent-sessions", {})
  const step = await world.api("POST", `/v1/agent-sessions/${session.body.id}/steps`, {
    step_id: tool,
    tool,
    action_class: "deploy",
    arguments: {}
  })
  assert.strictEqual(step.body.decision, "pending", JSON.stringify(step.body))
  return step.body.approval_id as string
}

describeBrowser("Webhooks", () => {
  it("create with every event by default; the secret is shown once and absent after reload; edit events; rotate with an overlap", async () => {
    const receiver = await world.receiver()
    const { page, done } = await admin()
    await page.goto(`${world.baseUrl}/console/webhooks`)
    await page.getByRole("textbox", { name: "Destination URL" }).fill(receiver.url("/hooks/created"))
    const events = page.getByRole("group", { name: "Events to send" }).getByRole("checkbox")
    assert.strictEqual(await events.count(), 6)
    for (const box of await events.all()) assert.isTrue(await box.isChecked(), "every event is chosen by default")
    await page.getByRole("button", { name: "Create endpoint" }).click()
    const shown = page.getByRole("region", { name: "Signing secret of the new endpoint" })
    await shown.waitFor()
    const secret = (await shown.locator("[data-secret]").textContent())!
    assert.match(secret, /^whsec_/)
    await checkAccessibility(page, "webhooks with a new secret")
    await screenshot(page, "webhooks-secret")
    await page.getByRole("button", { name: "I have saved it" }).click()
    await shown.waitFor({ state: "detached" })
    assert.notInclude(await page.content(), secret)
    await page.reload()
    const hint = (await world.api("GET", "/v1/notification-endpoints")).body.endpoints[0].url_hint as string
    const card = page.getByRole("listitem", { name: hint })
    await card.waitFor()
    assert.notInclude(await page.content(), secret, "the secret is never shown again")

    await card.getByRole("button", { name: "Edit events" }).click()
    await card.getByRole("checkbox", { name: "approval.expiring" }).uncheck()
    await card.getByRole("button", { name: "Save events" }).click()
    await page.getByText(/Events of .* saved\./).waitFor()
    await until(async () => !(await card.textContent())!.includes("approval.expiring"), "the events to change")

    await card.getByRole("combobox", { name: "Old secret keeps working" }).selectOption({ label: "1 hour" })
    await card.getByRole("button", { name: "Rotate secret" }).click()
    const rotated = page.getByRole("region", { name: /New signing secret of/ })
    await rotated.waitFor()
    const next = (await rotated.locator("[data-secret]").textContent())!
    assert.match(next, /^whsec_/)
    assert.notStrictEqual(next, secret)
    await page.getByText(/Secret rotated\. Deliveries are signed with the previous secret too until/).waitFor()
    await page.getByRole("button", { name: "I have saved it" }).click()
    await done()
  })

  it("a failed delivery is replayed from the log and delivered; NOT_REPLAYABLE is explained; delete asks first", async () => {
    const receiver = await world.receiver({ respond: () => Reply.status(500) })
    const created = await world.api("POST", "/v1/notification-endpoints", {
      url: receiver.url("/hooks/failing"),
      events: ["approval.requested"]
    })
    assert.strictEqual(created.status, 201)
    const approvalId = await requestApproval("failing-deploy")
    // The first attempt and its one retry (SVC_WEBHOOK_RETRY_SCHEDULE=1s) fail.
    await Effect.runPromise(receiver.waitForRequests(2, "20 seconds"))
    await until(
      async () => {
        const log = await world.api("GET", `/v1/notification-endpoints/${created.body.endpoint.id}/deliveries`)
        return log.body.deliveries[0]?.status === "failed"
      },
      "the delivery to fail for good",
      20_000
    )

    const { page, done } = await admin()
    await page.goto(`${world.baseUrl}/console/webhooks`)
    const card = page.getByRole("listitem", { name: created.body.endpoint.url_hint })
    await card.getByRole("button", { name: "Deliveries" }).click()
    await card.getByRole("combobox", { name: "Status" }).selectOption("failed")
    await until(async () => new URL(page.url()).searchParams.get("status") === "failed", "the status filter in the URL")
    const row = card.getByRole("row", { name: new RegExp(`approval.requested ${approvalId}`) })
    await row.waitFor()
    assert.include(await row.textContent(), "failed")
    await checkAccessibility(page, "the delivery log")
    await screenshots(page, "webhooks-deliveries")

    receiver.respond(() => Reply.ok())
    const before = receiver.requests().length
    await row.getByRole("button", { name: /^Replay/ }).click()
    await page.getByText(/Replay queued/).waitFor()
    const delivered = await Effect.runPromise(receiver.waitFor((request) => request.index >= before, "20 seconds"))
    const event = JSON.parse(Buffer.from(delivered.body).toString("utf8"))
    assert.strictEqual(event.approval.approval_id, approvalId)
    await card.getByRole("combobox", { name: "Status" }).selectOption("delivered")
    await card.getByRole("row", { name: new RegExp(`approval.requested ${approvalId}`) }).waitFor({ timeout: 15_000 })

    // Replaying what is no longer failed: the problem in words, not an error page.
    receiver.respond(() => Reply.status(500))
    const second = await requestApproval("second-failing-deploy")
    await until(
      async () => {
        const log = await world.api("GET", `/v1/notification-endpoints/${created.body.endpoint.id}/deliveries`)
        return log.body.deliveries.find((d: any) => d.label?.endsWith(second))?.status === "failed"
      },
      "the second delivery to fail",
      20_000
    )
    await card.getByRole("combobox", { name: "Status" }).selectOption("failed")
    const secondRow = card.getByRole("row", { name: new RegExp(second) })
    await secondRow.waitFor({ timeout: 15_000 })
    // The log stops polling (a page out of sight does not poll), so the row stays as the console saw it.
    await stopPolling(page)
    // The receiver holds the replayed attempt open, so the delivery is not failed while the console replays it.
    receiver.respond(() => Reply.hang())
    const log = await world.api("GET", `/v1/notification-endpoints/${created.body.endpoint.id}/deliveries`)
    const id = log.body.deliveries.find((d: any) => d.label?.endsWith(second)).id
    const elsewhere = await world.api(
      "POST",
      `/v1/notification-endpoints/${created.body.endpoint.id}/deliveries/${id}/replay`
    )
    assert.strictEqual(elsewhere.status, 200, JSON.stringify(elsewhere.body))
    const answered = page.waitForResponse((response) => response.url().endsWith(`/deliveries/${id}/replay`))
    await secondRow.getByRole("button", { name: /^Replay/ }).click()
    const replayAnswer = await answered
    assert.strictEqual(replayAnswer.status(), 409, await replayAnswer.text())
    // The refusal in the delivery's row, naming it and why, with the focus there; nothing at the top of the page.
    const refused = secondRow.locator(".refusal")
    await refused.waitFor()
    assert.match(
      flat(await refused.textContent()),
      new RegExp(
        `^Replay of approval\\.requested .*${second} refused\\. Only failed deliveries can be replayed, and this one is sending\\.`
      )
    )
    assert.isTrue(
      await secondRow.evaluate((node) => node.contains(document.activeElement)),
      "the focus is in the delivery's row"
    )
    assert.strictEqual(await page.locator(".notice-slot .notice.error").count(), 0, "no refusal at the top of the page")
    await screenshots(page, "webhooks-refused-replay")
    await resumePolling(page)

    await card.getByRole("button", { name: "Delete" }).click()
    const dialog = page.getByRole("dialog", { name: "Delete this endpoint?" })
    await dialog.waitFor()
    await checkAccessibility(page, "the delete confirmation")
    await dialog.getByRole("button", { name: "Cancel" }).click()
    await dialog.waitFor({ state: "hidden" })
    await card.getByRole("button", { name: "Delete" }).click()
    await dialog.getByRole("button", { name: "Delete endpoint" }).click()
    await card.waitFor({ state: "detached" })
    const listed = await world.api("GET", "/v1/notification-endpoints")
    assert.isFalse(listed.body.endpoints.some((e: any) => e.id === created.body.endpoint.id))
    await done()
  })

  it("the delivery log searches by HTTP status and approval and keeps the search in the URL; a refused value is explained", async () => {
    const receiver = await world.receiver({ respond: () => Reply.status(500) })
    const created = await world.api("POST", "/v1/notification-endpoints", {
      url: receiver.url("/hooks/searched"),
      events: ["approval.requested"]
    })
    assert.strictEqual(created.status, 201)
    const endpointId = created.body.endpoint.id
    const approvals = [await requestApproval("searched-one"), await requestApproval("searched-two")]
    // Retrying or failed: either way their last attempt got a 500.
    await until(
      async () => {
        const log = await world.api("GET", `/v1/notification-endpoints/${endpointId}/deliveries?status_code=500`)
        return log.body.deliveries.length === 2
      },
      "both deliveries' first attempt to get a 500",
      30_000
    )

    const { page, done } = await admin()
    await page.goto(`${world.baseUrl}/console/webhooks`)
    const card = page.getByRole("listitem", { name: created.body.endpoint.url_hint })
    await card.getByRole("button", { name: "Deliveries" }).click()
    const filters = card.getByRole("form", { name: "Delivery filters" })
    await filters.getByRole("textbox", { name: "HTTP status" }).fill("5xx")
    await filters.getByRole("textbox", { name: "Approval id" }).fill(approvals[1]!)
    await filters.getByRole("button", { name: "Search" }).click()
    await until(async () => {
      const query = new URL(page.url()).searchParams
      return query.get("status_code") === "5xx" && query.get("approval_id") === approvals[1]
    }, "the search in the URL")
    const row = card.getByRole("row", { name: new RegExp(`approval.requested ${approvals[1]}`) })
    await row.waitFor()
    assert.include(await row.textContent(), "500")
    await until(
      async () => (await card.getByRole("row").count()) === 2,
      "only the searched delivery (and the header row)"
    )
    await checkAccessibility(page, "the searched delivery log")
    await screenshot(page, "webhooks-delivery-search")

    // The search survives a reload (it is the URL), and reads the same on a phone.
    const phone = await admin({ width: 390 })
    await phone.page.goto(page.url())
    const phoneCard = phone.page.getByRole("listitem", { name: created.body.endpoint.url_hint })
    await phoneCard.getByRole("row", { name: new RegExp(approvals[1]!) }).waitFor()
    await assertControlsInView(phone.page, "the searched delivery log")
    await screenshot(phone.page, "webhooks-delivery-search-phone")
    await phone.done()

    // A value the API refuses is explained, not ignored.
    await filters.getByRole("textbox", { name: "HTTP status" }).fill("6xx")
    await filters.getByRole("button", { name: "Search" }).click()
    await card.getByText(/status_code/).first().waitFor()

    // Cleared: every delivery again.
    await filters.getByRole("button", { name: "Clear filters" }).click()
    for (const approval of approvals) await card.getByRole("row", { name: new RegExp(approval) }).waitFor()
    await done()
  })

  it("the reviewer email setting", async () => {
    const { page, done } = await admin({ width: 390, colorScheme: "dark" })
    await page.goto(`${world.baseUrl}/console/webhooks`)
    await page.getByRole("textbox", { name: /Address that gets approval requests/ }).fill("reviewers@example.com")
    await page.getByRole("button", { name: "Save email" }).click()
    const section = page.getByRole("region", { name: "Reviewer email" })
    await section.getByText(/Reviewer email set to reviewers@example.com/).waitFor()
    const settings = await world.api("GET", "/v1/notification-settings")
    assert.strictEqual(settings.body.reviewer_email, "reviewers@example.com")
    // An address the browser takes and the service refuses: said in the section, naming it, focused.
    await page.getByRole("textbox", { name: /Address that gets approval requests/ }).fill("ops@localhost")
    await page.getByRole("button", { name: "Save email" }).click()
    const refusal = section.locator(".refusal")
    await refusal.waitFor()
    assert.match(
      flat(await refusal.textContent()),
      /^Saving the reviewer email ops@localhost refused\. .*email address/
    )
    assert.isTrue(
      await section.evaluate((node) => node.contains(document.activeElement)),
      "the focus is in the section"
    )
    assert.strictEqual(await page.locator(".notice-slot .notice.error").count(), 0, "no refusal at the top of the page")
    assert.strictEqual(
      (await world.api("GET", "/v1/notification-settings")).body.reviewer_email,
      "reviewers@example.com"
    )
    await screenshots(page, "webhooks-refused-reviewer-email")
    const overflow = await page.evaluate(() =>
      document.documentElement.scrollWidth - document.documentElement.clientWidth
    )
    assert.isAtMost(overflow, 0)
    await checkAccessibility(page, "webhooks at 390 px, dark")
    await screenshot(page, "webhooks-390-dark")
    await done()
  })
})

describeBrowser("Telemetry", () => {
  it("refused headers explained per header; create; counters move by themselves; test span; a failed batch replayed; delete", async () => {
    const collector = await world.receiver()
    const { page, done } = await admin()
    await page.goto(`${world.baseUrl}/console/telemetry`)
    await page.getByRole("textbox", { name: "Collector traces URL (HTTPS)" }).fill(collector.url("/v1/traces"))
    for (
      const [name, value] of [["Host", "collector.example.com"], ["Authorization", "Bearer token-1"], [
        "traceparent",
        "x"
      ]]
    ) {
      await page.getByRole("button", { name: "Add header" }).click()
      const n = await page.getByRole("textbox", { name: /^Header \d+ name$/ }).count()
      await page.getByRole("textbox", { name: `Header ${n} name` }).fill(name!)
      await page.getByLabel(`Header ${n} value`).fill(value!)
    }
    await page.getByRole("button", { name: "Create destination" }).click()
    await page.getByText("The collector headers were refused: 2 headers to fix below.").waitFor()
    // Said under the form, naming what it refused, and focused; nothing at the top of the page.
    const refusal = page.getByRole("form", { name: "New destination" }).locator(".refusal")
    assert.match((await refusal.textContent())!, /^Creating the destination https:\/\/\S+ refused\./)
    assert.isTrue(await refusal.evaluate((node) => node === document.activeElement), "the focus moves to the refusal")
    assert.strictEqual(await page.locator(".notice-slot .notice").count(), 0)
    await page.getByText(
      "Host: Expected a header svc may send: not a transport, hop-by-hop, trace-context or cookie header"
    ).waitFor()
    await page.getByText(
      "traceparent: Expected a header svc may send: not a transport, hop-by-hop, trace-context or cookie header"
    ).waitFor()
    assert.strictEqual(await page.getByText(/^Authorization:/).count(), 0, "Authorization is not refused")
    await checkAccessibility(page, "refused headers")
    await screenshots(page, "telemetry-refused-headers")
    await page.getByRole("button", { name: "Remove header 3" }).click()
    await page.getByRole("button", { name: "Remove header 1" }).click()
    await page.getByRole("button", { name: "Create destination" }).click()
    const card = page.getByRole("listitem", { name: /127\.0\.0\.1/ })
    await card.waitFor()

    // Traffic of the organization makes spans: the counters and the last delivery move without a reload.
    const lastDelivery = card.locator("dt:text('Last delivery') + dd")
    const seenPending = new Set<string>()
    // The traffic goes on until the screen has shown the counters move: a
    // fixed burst could be exported whole between two looks at a busy
    // machine, and the pending counter would never be seen off zero.
    let moving = true
    const traffic = (async () => {
      while (moving) await world.api("GET", "/v1/tasks")
    })()
    try {
      await until(
        async () => {
          seenPending.add((await card.locator("[data-counter=pending]").textContent())!)
          return (await lastDelivery.textContent()) !== "—" && seenPending.size >= 2
        },
        "the counters and the last delivery to move",
        30_000
      )
    } finally {
      moving = false
      await traffic
    }
    assert.isTrue(collector.requests().some((request) => request.path === "/v1/traces"))

    await card.getByRole("button", { name: "Send test span" }).click()
    await card.getByText("The collector accepted the test span.").waitFor()
    collector.respond(() => Reply.status(401))
    await card.getByRole("button", { name: "Send test span" }).click()
    await card.getByText("The collector did not accept the test span: it answered HTTP 401.").waitFor()

    // A 400 fails a batch at once; once the collector accepts again, the batch is replayed.
    collector.respond(() => Reply.status(400))
    await world.api("GET", "/v1/tasks")
    const failed = card.getByRole("row").filter({ hasText: "failed" }).first()
    await failed.waitFor({ timeout: 20_000 })
    await checkAccessibility(page, "the telemetry destination")
    await screenshots(page, "telemetry")
    collector.respond(() => Reply.ok())
    const before = collector.requests().length
    await failed.getByRole("button", { name: "Replay" }).click()
    // Said in the batch's row, where its Replay was; nothing at the top of the page.
    await card.getByRole("row").getByRole("status").getByText("Batch queued again: it is sent shortly.").waitFor()
    assert.notInclude(await page.locator(".notice-slot").first().textContent(), "queued again")
    await screenshots(page, "telemetry-replayed")
    await Effect.runPromise(
      collector.waitFor((request) => request.index >= before && request.path === "/v1/traces", "20 seconds")
    )

    // A replay and a delete the service refuses (done meanwhile through the API): each said at its
    // control, naming what it refused and why, with the focus there; nothing at the top of the page.
    collector.respond(() => Reply.status(400))
    await world.api("GET", "/v1/tasks")
    const again = card.getByRole("row").filter({ hasText: "failed" }).first()
    await again.waitFor({ timeout: 20_000 })
    await stopPolling(page)
    // Every failed batch is replayed through the API: the one the row shows is no longer failed.
    const destinationId = (await world.api("GET", "/v1/telemetry-destinations")).body.destinations[0].id as string
    const batches = await world.api("GET", `/v1/telemetry-destinations/${destinationId}/deliveries`)
    collector.respond(() => Reply.ok())
    for (
      const batch of batches.body.deliveries.filter((delivery: { status: string }) => delivery.status === "failed")
    ) {
      const replayed = await world.api(
        "POST",
        `/v1/telemetry-destinations/${destinationId}/deliveries/${batch.id}/replay`
      )
      assert.strictEqual(replayed.status, 200, JSON.stringify(replayed.body))
    }
    await again.getByRole("button", { name: "Replay" }).click()
    const replayRefusal = again.locator(".refusal")
    await replayRefusal.waitFor()
    assert.match(
      flat(await replayRefusal.textContent()),
      /^Replay of the batch of \d+ spans made .* refused\. Only failed batches can be replayed, and this one is \w+\./
    )
    assert.isTrue(
      await again.evaluate((node) => node.contains(document.activeElement)),
      "the focus is in the batch's row"
    )
    assert.strictEqual(await page.locator(".notice-slot .notice.error").count(), 0, "no refusal at the top of the page")
    await screenshots(page, "telemetry-refused-replay")
    const gone = await world.api("DELETE", `/v1/telemetry-destinations/${destinationId}`)
    assert.strictEqual(gone.status, 204, JSON.stringify(gone.body))
    await card.getByRole("button", { name: "Delete" }).click()
    await page.getByRole("dialog", { name: "Delete this destination?" }).getByRole("button", {
      name: "Delete destination"
    }).click()
    const deleteRefusal = card.locator(".refusal").filter({ hasText: "Deleting the destination" })
    await deleteRefusal.waitFor()
    assert.match(flat(await deleteRefusal.textContent()), /^Deleting the destination \S+ refused\. .*no longer exists/)
    assert.isTrue(
      await card.evaluate((node) => node.contains(document.activeElement)),
      "the focus is in the destination's card"
    )
    assert.strictEqual(await page.locator(".notice-slot .notice.error").count(), 0, "no refusal at the top of the page")
    await screenshots(page, "telemetry-refused-delete")
    await resumePolling(page)
    await page.getByRole("button", { name: "Create destination" }).waitFor()
    const listed = await world.api("GET", "/v1/telemetry-destinations")
    assert.deepStrictEqual(listed.body.destinations, [])
    await done()
  })
})

describeBrowser("Telemetry protocol and compression", () => {
  it("a destination created with OTLP/HTTP protobuf and gzip shows both, and its collector gets gzipped protobuf the official definitions read", async () => {
    const collector = await world.receiver()
    const { page, done } = await admin()
    await page.goto(`${world.baseUrl}/console/telemetry`)
    await page.getByRole("textbox", { name: "Collector traces URL (HTTPS)" }).fill(collector.url("/v1/traces"))
    const protocol = page.getByRole("combobox", { name: "Protocol" })
    const compression = page.getByRole("combobox", { name: "Compression" })
    assert.strictEqual(await protocol.inputValue(), "http/json", "JSON by default")
    assert.strictEqual(await compression.inputValue(), "none", "no compression by default")
    await protocol.selectOption("http/protobuf")
    await compression.selectOption("gzip")
    await screenshot(page, "telemetry-protocol-form")
    await page.getByRole("button", { name: "Create destination" }).click()
    const card = page.getByRole("listitem", { name: /127\.0\.0\.1/ })
    await card.waitFor()
    assert.strictEqual(await card.locator("[data-setting=protocol]").textContent(), "OTLP/HTTP protobuf")
    assert.strictEqual(await card.locator("[data-setting=compression]").textContent(), "gzip")
    const listed = await world.api("GET", "/v1/telemetry-destinations")
    assert.deepInclude(listed.body.destinations[0], { protocol: "http/protobuf", compression: "gzip" })

    await card.getByRole("button", { name: "Send test span" }).click()
    await card.getByText("The collector accepted the test span.").waitFor()
    // The organization's own requests are exported to it too: the test span may come in any batch.
    const batches = collector.requests().filter((r) => r.path === "/v1/traces")
    for (const batch of batches) {
      assert.strictEqual(batch.headers["content-type"], "application/x-protobuf")
      assert.strictEqual(batch.headers["content-encoding"], "gzip")
      assert.deepStrictEqual(decodeOtlp(batch).problems, [])
    }
    assert.isTrue(
      batches.some((batch) => decodeOtlp(batch).spans.some((span) => span.name === "svc.telemetry.test")),
      "the test span reached the collector as gzipped protobuf"
    )
    await checkAccessibility(page, "a protobuf destination")
    await screenshot(page, "telemetry-protocol")

    await card.getByRole("button", { name: "Delete" }).click()
    await page.getByRole("dialog", { name: "Delete this destination?" }).getByRole("button", {
      name: "Delete destination"
    }).click()
    await page.getByRole("button", { name: "Create destination" }).waitFor()
    await done()
  })
})

describeBrowser("API keys and console sessions", () => {
  it("a key created with chosen scopes is shown once and works; revoked, it stops; a console session revoked ends at once", async () => {
    const reviewer = await world.open()
    await signIn(reviewer.page, await world.link("reviewer", "Rita Revoked"))
    const { page, done } = await admin()
    await page.goto(`${world.baseUrl}/console/keys`)
    await page.getByRole("textbox", { name: "Name" }).fill("ci-reader")
    await page.getByRole("checkbox", { name: "tasks.read" }).check()
    await page.getByRole("button", { name: "Create key" }).click()
    const shown = page.getByRole("region", { name: "The new API key" })
    await shown.waitFor()
    const key = (await shown.locator("[data-secret]").textContent())!
    await checkAccessibility(page, "API keys with a new key")
    await screenshot(page, "keys-created")
    assert.strictEqual((await world.api("GET", "/v1/tasks", undefined, key)).status, 200)
    assert.strictEqual((await world.api("GET", "/v1/feedback", undefined, key)).status, 403)
    await page.reload()
    const row = page.getByRole("row", { name: /ci-reader/ })
    await row.waitFor()
    assert.notInclude(await page.content(), key, "the key is never shown again")
    await row.getByRole("button", { name: "Revoke key ci-reader" }).click()
    await page.getByRole("dialog", { name: "Revoke this API key?" }).getByRole("button", { name: "Revoke key" }).click()
    await page.getByText(/revoked: it stops working at once/).waitFor()
    assert.strictEqual((await world.api("GET", "/v1/tasks", undefined, key)).status, 401)

    const session = page.getByRole("row", { name: /Rita Revoked/ }).first()
    await session.getByRole("button", { name: "Revoke session of Rita Revoked" }).click()
    await page.getByRole("dialog", { name: "Revoke this console session?" }).getByRole("button", {
      name: "Revoke session"
    }).click()
    await page.getByText("Session of Rita Revoked revoked: it ends at once.").waitFor()
    await reviewer.page.reload()
    await reviewer.page.getByText("You are not signed in").waitFor()
    await reviewer.done()

    // A session gone meanwhile: the console's Revoke is refused in that session's row.
    const other = await world.open()
    await signIn(other.page, await world.link("reviewer", "Rex Elsewhere"))
    await page.reload()
    const rex = page.getByRole("row", { name: /Rex Elsewhere/ })
    await rex.waitFor()
    const listed = await world.api("GET", "/v1/console/sessions")
    const rexId = listed.body.sessions.find((item: { person: string }) => item.person === "Rex Elsewhere").id as string
    // Revoking a revoked session answers it unchanged: one the service no longer has is refused.
    await world.sql(`DELETE FROM console_sessions WHERE id = '${rexId}'`)
    await rex.getByRole("button", { name: "Revoke session of Rex Elsewhere" }).click()
    await page.getByRole("dialog", { name: "Revoke this console session?" }).getByRole("button", {
      name: "Revoke session"
    }).click()
    const refusal = rex.locator(".refusal")
    await refusal.waitFor()
    assert.match(
      flat(await refusal.textContent()),
      /^Revoking the session of Rex Elsewhere \(signed in .*\) refused\. .*no longer exists/
    )
    assert.isTrue(
      await rex.evaluate((node) => node.contains(document.activeElement)),
      "the focus is in the session's row"
    )
    assert.strictEqual(await page.locator(".notice-slot .notice.error").count(), 0, "no refusal at the top of the page")
    await screenshots(page, "keys-refused-revoke")
    await other.done()
    await done()
  })

  it("a key made in the console records who made it, the screen says it outlives the session, and it keeps working after sign-out", async () => {
    const { page, done } = await admin()
    await page.goto(`${world.baseUrl}/console/keys`)
    await page.getByText("it keeps working after you sign out or your session ends, until someone revokes it below")
      .waitFor()
    await page.getByRole("textbox", { name: "Name" }).fill("outlives-session")
    await page.getByRole("checkbox", { name: "tasks.read" }).check()
    await page.getByRole("button", { name: "Create key" }).click()
    const shown = page.getByRole("region", { name: "The new API key" })
    await shown.waitFor()
    const key = (await shown.locator("[data-secret]").textContent())!
    await page.getByText(
      "Key created, recorded as made by Ada Admin. It keeps working after this console session ends, until it is revoked here."
    ).waitFor()
    await page.getByRole("button", { name: "I have saved it" }).click()
    const row = page.getByRole("row", { name: /outlives-session/ })
    await row.getByRole("cell", { name: "Ada Admin (console)" }).waitFor()
    await checkAccessibility(page, "API keys with who made each")
    await screenshot(page, "keys-created-by")
    const listed = (await world.api("GET", "/v1/api-keys")).body.keys.find((k: { name: string }) =>
      k.name === "outlives-session"
    )
    assert.strictEqual(listed.created_by, "console:Ada Admin")
    await page.getByRole("button", { name: "Sign out" }).click()
    await page.getByText("You are not signed in").waitFor()
    assert.strictEqual(
      (await world.api("GET", "/v1/tasks", undefined, key)).status,
      200,
      "the key outlives the session that made it"
    )
    await done()
  })
})
