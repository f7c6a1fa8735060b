/**
 * Delegations name their API keys: each delegation carries `key_names`, the
 * names of the named keys it gives as delegator or delegate, by id, so a
 * person who decides (without `keys.manage`) reads who a key is. Only keys
 * of the caller's organization are named, and never a key's material.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"

const inAnHour = () => new Date(Date.now() + 3_600_000).toISOString()

layer(SvcTest.layer(), { excludeTestServices: true })("delegation key names", (it) => {
  describe("key_names", () => {
    it.effect("names the named keys a delegation gives, to a caller without keys.manage, and nothing else", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const named = (name: string) =>
          org.client.apiKeys.create({ payload: { name, scopes: ["approvals.decide"] } }).pipe(
            Effect.flatMap((created) =>
              Effect.map(svc.client(created.key), (client) => ({ id: created.api_key.id, key: created.key, client }))
            )
          )
        const lead = yield* named("payments-lead")
        const night = yield* named("night-shift")
        const unnamed = yield* org.newKey(["approvals.decide"])
        const other = yield* SvcTest.org()
        const elsewhere = yield* other.client.apiKeys.create({
          payload: { name: "other-org-key", scopes: ["approvals.decide"] }
        })

        // Created: the answer names both keys.
        const toKey = yield* lead.client.reviewers.delegate({
          payload: { delegate: { key_id: night.id }, ends_at: inAnHour() }
        })
        assert.deepStrictEqual(toKey.key_names, { [lead.id]: "payments-lead", [night.id]: "night-shift" })
        // A console person is no key; an unnamed key is left out; none named: no key_names at all.
        const toPerson = yield* lead.client.reviewers.delegate({
          payload: { delegate: { console_user: "Ben Backup" }, ends_at: inAnHour() }
        })
        assert.deepStrictEqual(toPerson.key_names, { [lead.id]: "payments-lead" })
        const fromUnnamed = yield* unnamed.client.reviewers.delegate({
          payload: { delegate: { console_user: "Ben Backup" }, ends_at: inAnHour() }
        })
        assert.notProperty(fromUnnamed, "key_names")
        // A delegation naming another organization's key (stored as such, which the API refuses to make).
        yield* svc.sql`UPDATE reviewer_delegations SET delegate = ${elsewhere.api_key.id}
          WHERE id = ${fromUnnamed.delegation_id}`

        // Listed to a key holding only approvals.decide: the same names, nothing of the other organization.
        const response = yield* raw(`${svc.baseUrl}/v1/reviewer-delegations`, {
          headers: { authorization: `Bearer ${night.key}` }
        })
        assert.strictEqual(response.status, 200, response.text)
        const byId = new Map<string, any>(response.json.delegations.map((d: any) => [d.delegation_id, d]))
        assert.deepStrictEqual(byId.get(toKey.delegation_id).key_names, toKey.key_names)
        assert.deepStrictEqual(byId.get(toPerson.delegation_id).key_names, toPerson.key_names)
        assert.deepStrictEqual(byId.get(fromUnnamed.delegation_id).delegate, { key_id: elsewhere.api_key.id })
        assert.notProperty(byId.get(fromUnnamed.delegation_id), "key_names")
        assert.notInclude(response.text, "other-org-key")
        for (const secret of [lead.key, night.key, unnamed.key, elsewhere.key]) {
          assert.notInclude(response.text, secret)
          assert.notInclude(response.text, secret.slice(0, 12), "not even a key's prefix")
        }
        const refused = yield* raw(`${svc.baseUrl}/v1/api-keys`, { headers: { authorization: `Bearer ${night.key}` } })
        assert.strictEqual(refused.status, 403, "the caller cannot list the keys themselves")

        // Ended: the answer still names them.
        const ended = yield* lead.client.reviewers.endDelegation({ params: { delegation_id: toKey.delegation_id } })
        assert.deepStrictEqual(ended.key_names, toKey.key_names)
      }))
  })
})
