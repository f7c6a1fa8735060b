/**
 * A governed step checks its cached policy against the stored one by the
 * policy's version (`approval_policies.version`, migration
 * `0840_policy_versions`): a trigger moves it on every update, whoever
 * writes, and a policy stored again after a delete takes a new one from a
 * sequence. So a change made by another process, even one that knows
 * nothing of the version and only alters the rules, applies to the next
 * step at once.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { PgMigrator } from "@effect/sql-pg"
import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import type { PolicyInput } from "../../../src/api/Policies.ts"
import { Migrations } from "../../../src/database/Migrations.ts"
import { migrationRecord } from "../../../src/database/migrations/index.ts"
import { SvcTest } from "../../../src/testing.ts"
import { databases } from "../../support/databases.ts"

const shell: PolicyInput = {
  mode: "require_approval",
  review_seconds: 900,
  expiring_notice_seconds: 60,
  timeout_action: "reject",
  rules: [{ name: "srv", condition: `arguments.cwd.startsWith("/srv")`, result: { decision: "allow" } }]
}

/** The same settings with other rules: the step below is rejected by them. */
const otherRules = [{
  name: "no-srv",
  condition: `arguments.cwd.startsWith("/srv")`,
  result: { decision: "reject", reason: "Not in /srv." }
}]

const step = (step_id: string) => ({
  step_id,
  tool: "shell",
  action_class: "shell",
  arguments: { command: "ls", cwd: "/srv" } as any
})

const versionOf = (sql: SqlClient.SqlClient, orgId: string) =>
  Effect.map(
    sql<
      { version: string }
    >`SELECT version::text AS version FROM approval_policies WHERE org_id = ${orgId} AND action_class = 'shell'`,
    (rows) => BigInt(rows[0]!.version)
  ).pipe(Effect.orDie)

layer(SvcTest.layer(), { excludeTestServices: true })("the version of a stored policy", (it) => {
  describe("a change made by another process applies to the next step", () => {
    // Each change below is written to the table directly, as another process's change whose notification has not arrived yet:
    // the process's cache still holds the rule it read, and only the step's check of the version can find it out of date.
    it.effect("a change of the rules alone, by an UPDATE that does not mention the version", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        yield* org.client.approvalPolicies.put({ params: { action_class: "shell" }, payload: shell })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const govern = (stepId: string) =>
          org.client.agentSessions.governStep({ params: { session_id: session.id }, payload: step(stepId) })
        assert.deepStrictEqual(yield* govern("cached"), { decision: "allow", rule: "srv" })
        yield* svc.sql`
          UPDATE approval_policies SET rules = ${
          JSON.stringify(otherRules)
        }::jsonb WHERE org_id = ${org.orgId} AND action_class = 'shell'
        `
        assert.deepStrictEqual(yield* govern("changed"), { decision: "reject", rule: "no-srv", reason: "Not in /srv." })
      }))

    it.effect("a policy deleted and stored again with the same settings and other rules", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        yield* org.client.approvalPolicies.put({ params: { action_class: "shell" }, payload: shell })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const govern = (stepId: string) =>
          org.client.agentSessions.governStep({ params: { session_id: session.id }, payload: step(stepId) })
        assert.deepStrictEqual(yield* govern("cached"), { decision: "allow", rule: "srv" })
        yield* svc.sql.withTransaction(Effect.gen(function*() {
          yield* svc.sql`DELETE FROM approval_policies WHERE org_id = ${org.orgId} AND action_class = 'shell'`
          yield* svc.sql`
            INSERT INTO approval_policies (org_id, action_class, mode, review_seconds, expiring_notice_seconds, timeout_action, rules)
            VALUES (${org.orgId}, 'shell', 'require_approval', 900, 60, 'reject', ${JSON.stringify(otherRules)}::jsonb)
          `
        }))
        assert.deepStrictEqual(yield* govern("recreated"), {
          decision: "reject",
          rule: "no-srv",
          reason: "Not in /srv."
        })
      }))
  })

  describe("the version moves, whoever writes", () => {
    it.effect("an UPDATE that does not mention it, even one that changes nothing, an upsert, and a delete and insert each give a version no earlier row had", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        yield* org.client.approvalPolicies.put({ params: { action_class: "shell" }, payload: shell })
        const seen = [yield* versionOf(svc.sql, org.orgId)]
        const moved = (what: string) =>
          Effect.gen(function*() {
            const version = yield* versionOf(svc.sql, org.orgId)
            assert.isTrue(seen.every((earlier) => version > earlier), `${what}: ${version} after ${seen.join(", ")}`)
            seen.push(version)
          })
        // As a process of the release before the column would write it.
        yield* svc
          .sql`UPDATE approval_policies SET mode = 'allow', updated_at = now() WHERE org_id = ${org.orgId} AND action_class = 'shell'`
        yield* moved("an UPDATE of a setting")
        yield* svc.sql`UPDATE approval_policies SET mode = mode WHERE org_id = ${org.orgId} AND action_class = 'shell'`
        yield* moved("an UPDATE that changes nothing")
        yield* svc.sql`UPDATE approval_policies SET version = ${
          seen[0]!.toString()
        }::bigint WHERE org_id = ${org.orgId} AND action_class = 'shell'`
        yield* moved("an UPDATE setting an earlier version")
        yield* org.client.approvalPolicies.put({ params: { action_class: "shell" }, payload: shell })
        yield* moved("a PUT (INSERT ... ON CONFLICT DO UPDATE)")
        yield* svc.sql`DELETE FROM approval_policies WHERE org_id = ${org.orgId} AND action_class = 'shell'`
        yield* svc.sql`
          INSERT INTO approval_policies (org_id, action_class, mode, review_seconds, expiring_notice_seconds, timeout_action)
          VALUES (${org.orgId}, 'shell', 'require_approval', 900, 60, 'reject')
        `
        yield* moved("a delete and an insert")
      }))
  })
})

describe("policies stored before the version existed", () => {
  const before = Object.fromEntries(Object.entries(migrationRecord).filter(([key]) => key < "0840"))
  for (const [name, database] of databases) {
    it.live(
      `each take a version of their own from the sequence, below the next one (${name})`,
      () =>
        Effect.gen(function*() {
          yield* PgMigrator.run({ loader: Migrator.fromRecord(before), table: "svc_migrations" }).pipe(
            Effect.provide(NodeServices.layer)
          )
          const sql = yield* SqlClient.SqlClient
          const orgId = "00000000-0000-4000-8000-000000000840"
          yield* sql`INSERT INTO orgs (id, name) VALUES (${orgId}, 'versions')`
          for (const cls of ["a", "b", "c"]) {
            yield* sql`
            INSERT INTO approval_policies (org_id, action_class, mode, review_seconds, expiring_notice_seconds, timeout_action)
            VALUES (${orgId}, ${cls}, 'allow', 60, 0, 'reject')
          `
          }
          yield* Migrations.run
          const versions = (yield* sql<
            { version: string }
          >`SELECT version::text AS version FROM approval_policies ORDER BY action_class`)
            .map((row) => BigInt(row.version))
          assert.strictEqual(new Set(versions).size, 3)
          const [next] = yield* sql<{ version: string }>`SELECT nextval('approval_policy_versions')::text AS version`
          assert.isTrue(versions.every((version) => version < BigInt(next!.version)))
        }).pipe(Effect.provide(Layer.fresh(database()))),
      60_000
    )
  }
})
