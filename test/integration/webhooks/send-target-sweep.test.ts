/**
 * The send-target sweep: an entry of the sender's mirror stays trusted
 * while the sweep reads the same stamp for its endpoint, and is dropped
 * when anything a send is made of changed, however it changed: through the
 * API of any process, by direct SQL, or by a secret reaching its expiry on
 * the database's clock. A change to what sends are not made of (the failing
 * streak) keeps it.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, layer } from "@effect/vitest"
import { Clock, Effect } from "effect"
import type { SendTarget } from "../../../src/notifications/send/SendTargets.ts"
import {
  makeSendTargetMirror,
  SEND_TARGET_TTL_MS,
  STAMP,
  sweepOnce
} from "../../../src/notifications/send/TargetMirror.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { webhookService } from "./support.ts"

const target: SendTarget = {
  url: "https://127.0.0.1:9/hook",
  active: true,
  deactivatedReason: null,
  secrets: [],
  headers: []
}

/** A mirror of this test's own (another process's view) holding `endpointId` as looked up now. */
const mirrorHolding = (org: TestOrg, endpointId: string) =>
  Effect.gen(function*() {
    const sql = yield* PgClient.PgClient
    const mirror = makeSendTargetMirror<SendTarget>(yield* Clock.Clock, SEND_TARGET_TTL_MS)
    const key = `${org.orgId}:${endpointId}`
    const [row] = yield* sql<{ stamp: string }>`SELECT ${
      sql.literal(STAMP)
    } AS stamp FROM notification_endpoints e WHERE id = ${endpointId}`
    const lookup = mirror.began(key)
    mirror.found(key, lookup, target, row!.stamp)
    mirror.ended(key, lookup)
    const dropped: Array<string> = []
    /** One sweep, the entry read just before it (as a send would): whether the entry is still held after it. */
    const sweep = Effect.gen(function*() {
      mirror.now(key)
      dropped.push(...(yield* sweepOnce(sql, mirror)))
      return mirror.now(key) !== undefined
    })
    return { sweep, dropped, key }
  }).pipe(Effect.orDie)

const newEndpoint = (org: TestOrg) =>
  org.client.notifications.create({ payload: { url: "https://127.0.0.1:9/hook" } }).pipe(
    Effect.map(({ endpoint }) => endpoint.id)
  )

layer(webhookService(), { excludeTestServices: true })("send-target sweep", (it) => {
  describe("keeps", () => {
    it.effect("an unchanged endpoint, sweep after sweep, and one whose failing streak changed", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const id = yield* newEndpoint(org)
        const { dropped, sweep } = yield* mirrorHolding(org, id)
        assert.isTrue(yield* sweep)
        assert.isTrue(yield* sweep)
        yield* svc
          .sql`INSERT INTO delivery_targets (id, org_id, kind, failing_since) VALUES (${id}, ${org.orgId}, 'webhook', now())
          ON CONFLICT (id) DO UPDATE SET failing_since = now()`
        assert.isTrue(yield* sweep)
        assert.deepStrictEqual(dropped, [])
      }))
  })

  describe("drops", () => {
    it.effect("an endpoint deactivated by direct SQL", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const deactivated = yield* newEndpoint(org)
        const first = yield* mirrorHolding(org, deactivated)
        yield* svc
          .sql`UPDATE notification_endpoints SET active = false, deactivated_reason = 'by hand' WHERE id = ${deactivated}`
        assert.isFalse(yield* first.sweep)
        assert.deepStrictEqual(first.dropped, [first.key])
      }))

    it.effect("an endpoint whose secret was rotated, or whose headers were replaced, through the API", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const rotated = yield* newEndpoint(org)
        const first = yield* mirrorHolding(org, rotated)
        yield* org.client.notifications.rotateSecret({ params: { id: rotated }, payload: { overlap_seconds: 600 } })
        assert.isFalse(yield* first.sweep)

        const headed = yield* newEndpoint(org)
        const second = yield* mirrorHolding(org, headed)
        yield* org.client.notifications.update({
          params: { id: headed },
          payload: { headers: { "X-Team": "payments" } }
        })
        assert.isFalse(yield* second.sweep)
      }))

    it.effect("an endpoint whose old signing secret reached its expiry, with no write at that moment", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const id = yield* newEndpoint(org)
        yield* svc
          .sql`UPDATE org_secrets SET expires_at = now() + interval '2 seconds' WHERE owner_id = ${id} AND owner_kind = 'notification_endpoint'`
        const { sweep } = yield* mirrorHolding(org, id)
        assert.isTrue(yield* sweep)
        yield* Effect.sleep("2200 millis")
        assert.isFalse(yield* sweep)
      }))

    it.effect("a deleted endpoint", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const id = yield* newEndpoint(org)
        const { sweep } = yield* mirrorHolding(org, id)
        yield* org.client.notifications.remove({ params: { id } })
        assert.isFalse(yield* sweep)
      }))
  })
})
