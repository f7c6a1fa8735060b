import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import { mailLinkUrl, publicBaseUrl } from "../../../src/approvals/MailLinks.ts"
import { confirmationUrl } from "../../../src/notifications/send/ConfirmationLinks.ts"
import { renderConfirmation, renderEmail } from "../../../src/notifications/send/Email.ts"

const config = { publicUrl: Option.none<string>(), host: "127.0.0.1", port: 8080 }

/** An approval event's body as svc writes it, with `approval` members replaced. */
const eventBody = (type: string, approval: Record<string, unknown> = {}) =>
  JSON.stringify({
    id: "0193a4b0-0000-7000-8000-000000000009",
    type,
    org_id: "0193a4b0-0000-7000-8000-000000000002",
    occurred_at: "2026-11-23T10:00:00.000Z",
    approval: {
      approval_id: "0193a4b0-0000-7000-8000-000000000001",
      session_id: "0193a4b0-0000-7000-8000-000000000003",
      step_id: "s",
      task_id: null,
      status: "pending",
      deadline_at: "2026-11-23T10:15:00.000Z",
      expires_at: "2026-11-23T10:15:00.000Z",
      timeout_action: "reject",
      ...approval
    }
  })

describe("where a reviewer mail's link points", () => {
  it("SVC_PUBLIC_URL when set, else the address the server listens on (an unspecified host is reached on loopback)", () => {
    assert.strictEqual(
      publicBaseUrl({ ...config, publicUrl: Option.some("https://svc.example.com/base") }, Option.none()),
      "https://svc.example.com/base"
    )
    assert.strictEqual(
      publicBaseUrl(config, Option.some({ hostname: "127.0.0.1", port: 41234 })),
      "http://127.0.0.1:41234"
    )
    assert.strictEqual(publicBaseUrl(config, Option.some({ hostname: "0.0.0.0", port: 9 })), "http://127.0.0.1:9")
    assert.strictEqual(publicBaseUrl(config, Option.some({ hostname: "::1", port: 9 })), "http://[::1]:9")
    assert.strictEqual(publicBaseUrl(config, Option.none()), "http://127.0.0.1:8080")
  })

  it("the token travels in the fragment, which browsers never send", () => {
    const url = new URL(mailLinkUrl("https://svc.example.com", "sva_abc"))
    assert.strictEqual(url.pathname, "/console/decide")
    assert.strictEqual(url.search, "")
    assert.strictEqual(url.hash, "#sva_abc")
  })

  it("the mail shows the link on a line of its own, and no link when none was made", () => {
    const body = eventBody("approval.requested")
    const link = "https://svc.example.com/console/decide#sva_abc"
    assert.include(renderEmail("approval.requested", body, link).text.split("\n"), link)
    assert.notInclude(renderEmail("approval.requested", body).text, "/console/decide")
  })

  it("an escalation that hands the approval to a chain's next group says so, with the level; one that keeps the group does not", () => {
    const escalated = (approval: Record<string, unknown>) =>
      eventBody("approval.escalated", { expires_at: "2026-11-23T10:45:00.000Z", ...approval })
    const handed = renderEmail("approval.escalated", escalated({ assigned_group: "finance", escalation_level: 2 }))
    assert.strictEqual(
      handed.subject,
      "Approval escalated: handed to the next reviewer group: 0193a4b0-0000-7000-8000-000000000001"
    )
    assert.include(handed.text.split("\n"), "Escalation level: 2 (the group of the escalation chain it is now with)")
    assert.notInclude(handed.text, "finance")
    for (
      const kept of [
        renderEmail("approval.escalated", escalated({})),
        renderEmail("approval.escalated", escalated({ assigned_group: "finance", escalation_level: 0 }))
      ]
    ) {
      assert.strictEqual(
        kept.subject,
        "Approval escalated: another review window: 0193a4b0-0000-7000-8000-000000000001"
      )
      assert.notInclude(kept.text, "Escalation level")
    }
  })
})

describe("the confirmation mail of a new reviewer address", () => {
  it("links to /console/confirm-address with the token in the fragment, on a line of its own, and says when it expires", () => {
    const link = confirmationUrl("https://svc.example.com", "svr_abc")
    const url = new URL(link)
    assert.strictEqual(url.pathname, "/console/confirm-address")
    assert.strictEqual(url.hash, "#svr_abc")
    const mail = renderConfirmation(link, new Date("2026-11-24T10:00:00.000Z"))
    assert.strictEqual(mail.subject, "Confirm this address for approval requests")
    assert.include(mail.text.split("\n"), link)
    assert.include(mail.text, "The link expires at 2026-11-24T10:00:00.000Z.")
  })
})
