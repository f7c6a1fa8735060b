/**
 * Revoked API keys are deleted once revoked for `SVC_REVOKED_KEY_RETENTION`
 * (by the retention fiber); a key revoked more recently, and every active
 * key, stay. Deleting one moves the organization's credential fingerprint,
 * so the feedback scrubber reloads what it knows.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { SqlClient } from "effect/sql"
import { SvcTest } from "../../../src/testing.ts"
import { eventually } from "../../support/http.ts"

layer(
  SvcTest.layer({
    config: { revokedKeyRetention: Duration.minutes(1), retentionInterval: Duration.millis(200), retentionBatch: 1 }
  }),
  { excludeTestServices: true }
)("revoked key retention", (it) => {
  describe("revoked keys past retention are pruned", () => {
    it.effect("a key revoked longer ago than the retention is deleted; a recently revoked one and the active ones stay", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const org = yield* SvcTest.org()
        const old1 = yield* org.newKey(["tasks.read"])
        const old2 = yield* org.newKey(["tasks.read"])
        const recent = yield* org.newKey(["tasks.read"])
        for (const key of [old1, old2, recent]) yield* key.revoke
        yield* sql`UPDATE api_keys SET revoked_at = now() - interval '2 minutes' WHERE id IN ${
          sql.in([old1.keyId, old2.keyId])
        }`
        const [before] = yield* sql<
          { v: string }
        >`SELECT credentials_version::text AS v FROM orgs WHERE id = ${org.orgId}`
        const left = yield* eventually(
          Effect.map(
            sql<{ id: string }>`SELECT id FROM api_keys WHERE org_id = ${org.orgId} ORDER BY id`,
            (rows) => rows.length === 2 ? rows.map((row) => row.id) : undefined
          ),
          { what: "the old revoked keys to be pruned" }
        )
        assert.deepStrictEqual(left, [org.keyId, recent.keyId].sort())
        const [after] = yield* sql<
          { v: string }
        >`SELECT credentials_version::text AS v FROM orgs WHERE id = ${org.orgId}`
        assert.notStrictEqual(after!.v, before!.v)
      }))
  })
})
