/**
 * Searching the delivery log through the API: an endpoint's list and the
 * organization's list take the same filters and pages, refuse a value the
 * document does not allow with a 400 naming the parameter, and never show
 * another organization's deliveries.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { newId } from "../../../src/platform/Ids.ts"
import { SvcTest } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"
import { eventBody, insertEvents, waitForDeliveries, webhookService } from "./support.ts"

/** Nothing listens there: every attempt fails without an HTTP status. */
const hookUrl = "https://127.0.0.1:9/hooks"

layer(webhookService(), { excludeTestServices: true })("delivery log search", (it) => {
  it.effect("an endpoint's and the organization's deliveries filter by approval, event and type, page by cursor, and stay in the organization", () =>
    Effect.gen(function*() {
      const owner = yield* SvcTest.org()
      const other = yield* SvcTest.org()
      const { endpoint } = yield* owner.client.notifications.create({ payload: { url: hookUrl } })
      const { endpoint: second } = yield* owner.client.notifications.create({ payload: { url: `${hookUrl}/2` } })
      const { endpoint: foreign } = yield* other.client.notifications.create({ payload: { url: hookUrl } })
      const approval = newId()
      const mine = [
        eventBody(owner.orgId, "approval.requested", approval),
        eventBody(owner.orgId, "approval.approved", approval),
        eventBody(owner.orgId, "approval.requested")
      ]
      yield* insertEvents([...mine, eventBody(other.orgId, "approval.requested", approval)])
      yield* waitForDeliveries(endpoint.id, (rows) => rows.length === 3)
      yield* waitForDeliveries(second.id, (rows) => rows.length === 3)
      yield* waitForDeliveries(foreign.id, (rows) => rows.length === 1)

      const all = yield* owner.client.notifications.allDeliveries({ query: {} })
      assert.strictEqual(all.deliveries.length, 6)
      assert.strictEqual(all.next_cursor, null)
      assert.isTrue(all.deliveries.every((d) => d.endpoint_id === endpoint.id || d.endpoint_id === second.id))
      assert.deepStrictEqual(
        all.deliveries.map((d) => d.created_at),
        all.deliveries.map((d) => d.created_at).sort().reverse()
      )

      const ofApproval = yield* owner.client.notifications.allDeliveries({ query: { approval_id: approval } })
      assert.strictEqual(ofApproval.deliveries.length, 4)
      assert.isTrue(ofApproval.deliveries.every((d) => d.label?.endsWith(approval)))
      const approved = yield* owner.client.notifications.deliveries({
        params: { id: endpoint.id },
        query: { approval_id: approval, event_type: "approval.approved" }
      })
      assert.deepStrictEqual(approved.deliveries.map((d) => d.event_id), [mine[1]!.id])
      const ofEvent = yield* owner.client.notifications.allDeliveries({ query: { event_id: mine[2]!.id } })
      assert.deepStrictEqual(ofEvent.deliveries.map((d) => d.endpoint_id).sort(), [endpoint.id, second.id].sort())

      // Pages of two: the same six, once each.
      const paged: Array<string> = []
      let cursor: string | undefined
      do {
        const page = yield* owner.client.notifications.allDeliveries({
          query: { limit: 2, ...(cursor ? { cursor } : {}) }
        })
        paged.push(...page.deliveries.map((d) => d.id))
        cursor = page.next_cursor ?? undefined
      } while (cursor !== undefined)
      assert.deepStrictEqual(paged, all.deliveries.map((d) => d.id))

      // The other organization sees its one delivery, never the owner's, even for the same approval.
      const theirs = yield* other.client.notifications.allDeliveries({ query: { approval_id: approval } })
      assert.deepStrictEqual(theirs.deliveries.map((d) => d.endpoint_id), [foreign.id])
      const notTheirs = yield* Effect.flip(
        other.client.notifications.deliveries({ params: { id: endpoint.id }, query: {} })
      )
      assert.strictEqual(notTheirs._tag, "NotFound")
      // A cursor of the owner's list is refused on the other's, and on the owner's with other filters.
      const first = yield* owner.client.notifications.allDeliveries({ query: { limit: 1 } })
      const foreignCursor = yield* Effect.flip(
        other.client.notifications.allDeliveries({ query: { cursor: first.next_cursor! } })
      )
      assert.strictEqual(foreignCursor._tag, "InvalidRequest")
      const otherFilters = yield* Effect.flip(
        owner.client.notifications.allDeliveries({
          query: { cursor: first.next_cursor!, event_type: "approval.requested" }
        })
      )
      assert.strictEqual(otherFilters._tag, "InvalidRequest")
    }))

  it.effect("a filter value outside the document is 400 INVALID_REQUEST naming the parameter, on both lists", () =>
    Effect.gen(function*() {
      const svc = yield* SvcTest
      const org = yield* SvcTest.org()
      const { endpoint } = yield* org.client.notifications.create({ payload: { url: hookUrl } })
      const refused: ReadonlyArray<readonly [string, string]> = [
        ["status", "bounced"],
        ["status", "partial"],
        ["status_code", "6xx"],
        ["status_code", "1xx"],
        ["status_code", "99"],
        ["status_code", "5000"],
        ["event_type", "approval.maybe"],
        ["event_id", "not-a-uuid"],
        ["approval_id", "1234"],
        ["action_class", "payments.*.x"],
        ["action_class", ".payments"],
        ["label", ""],
        ["label", "x".repeat(301)],
        ["created_from", "yesterday"],
        ["created_until", "2026-02-30T00:00:00Z"],
        ["finished_from", "2026-11-23 08:00:00"],
        ["finished_until", "2026-11-23T08:00:00"],
        ["limit", "0"],
        ["limit", "101"],
        ["cursor", "not-one-we-issued"]
      ]
      for (const route of ["/v1/deliveries", `/v1/notification-endpoints/${endpoint.id}/deliveries`]) {
        for (const [name, value] of refused) {
          const response = yield* raw(`${svc.baseUrl}${route}?${new URLSearchParams({ [name]: value })}`, {
            headers: { authorization: `Bearer ${org.key}` }
          })
          assert.strictEqual(response.status, 400, `${route} ${name}=${value}`)
          assert.strictEqual(response.json.code, "INVALID_REQUEST")
          assert.strictEqual(response.json.field, name, `${route} ${name}=${value}`)
        }
        const fine = yield* raw(
          `${svc.baseUrl}${route}?${new URLSearchParams({
            status: "failed",
            status_code: "5xx",
            event_type: "endpoint.failing",
            action_class: "payments.*",
            label: "test*",
            created_from: "2026-11-23T08:00:00+01:00",
            finished_until: "2026-11-23T08:00:00.123456Z",
            limit: "100"
          })}`,
          { headers: { authorization: `Bearer ${org.key}` } }
        )
        assert.strictEqual(fine.status, 200, fine.text)
        assert.deepStrictEqual(fine.json, { deliveries: [], next_cursor: null })
      }
    }))
})
