/**
 * The bound a target shares (`setGroup`) comes back with every delivery a
 * claim hands out, from the log and from rows on their own, so the worker
 * admits it without asking the sender; a target without one has none.
 * Endpoints made before the column existed get theirs from their URL hint.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { PgMigrator } from "@effect/sql-pg"
import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import { Migrations } from "../../../src/database/Migrations.ts"
import { migrationRecord } from "../../../src/database/migrations/index.ts"
import { DeliveryQueue } from "../../../src/deliveries/DeliveryQueue.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { databases } from "../../support/databases.ts"
import { newOrg, QueueLive } from "./support.ts"

layer(QueueLive, { excludeTestServices: true })("a target's group", (it) => {
  it.effect("every claimed delivery carries its target's group, logged or strict; none without one", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const org = yield* newOrg
      const [logged, strict, bare] = [newId(), newId(), newId()]
      yield* queue.setGroup("webhook", org, logged, `${org} hooks.example.com`)
      yield* queue.setGroup("webhook", org, strict, `${org} hooks.example.com:8443`)
      yield* queue.setStrict("webhook", org, strict, true)
      for (const targetId of [logged, strict, bare]) {
        yield* queue.enqueueMany(
          [1, 2].map((n) => ({ orgId: org, kind: "webhook" as const, targetId, capacity: 100, label: `e${n}` }))
        )
      }
      const claimed = yield* queue.claim("webhook", { limit: 50, leaseFor: "1 minute", perTarget: 16 })
      const groups = (
        target: string
      ) => [...new Set(claimed.filter((d) => d.targetId === target).map((d) => d.targetGroup))]
      assert.deepStrictEqual(claimed.filter((d) => d.targetId === logged).map((d) => d.claimedFrom), [
        "logged",
        "logged"
      ])
      assert.deepStrictEqual(groups(logged), [`${org} hooks.example.com`])
      assert.deepStrictEqual(claimed.filter((d) => d.targetId === strict).map((d) => d.claimedFrom), ["queued"])
      assert.deepStrictEqual(groups(strict), [`${org} hooks.example.com:8443`])
      assert.deepStrictEqual(groups(bare), [undefined])
    }))
})

describe("endpoints made before targets had a group", () => {
  const before = Object.fromEntries(Object.entries(migrationRecord).filter(([key]) => key < "0960"))
  for (const [name, database] of databases) {
    it.live(
      `get their organization and host, with a target row where they had none (${name})`,
      () =>
        Effect.gen(function*() {
          yield* PgMigrator.run({ loader: Migrator.fromRecord(before), table: "svc_migrations" }).pipe(
            Effect.provide(NodeServices.layer)
          )
          const sql = yield* SqlClient.SqlClient
          const orgId = "00000000-0000-4000-8000-000000000960"
          const [withTarget, without] = ["961", "962"].map((n) => `00000000-0000-4000-8000-000000000${n}`)
          yield* sql`INSERT INTO orgs (id, name) VALUES (${orgId}, 'groups')`
          yield* sql`
          INSERT INTO notification_endpoints (id, org_id, url, url_hint, events, created_by)
          VALUES (${withTarget}, ${orgId}, 'u', 'https://hooks.example.com/…', '[]', 'k'),
                 (${without}, ${orgId}, 'u', 'amqp://broker.example.com:5673/', '[]', 'k')
        `
          yield* sql`INSERT INTO delivery_targets (id, org_id, kind, consecutive_failures) VALUES (${withTarget}, ${orgId}, 'webhook', 2)`
          yield* Migrations.run
          const targets = yield* sql<{ id: string; share_group: string; consecutive_failures: number }>`
          SELECT id, share_group, consecutive_failures FROM delivery_targets WHERE org_id = ${orgId} ORDER BY id
        `
          assert.deepStrictEqual(targets.map((t) => [t.id, t.share_group, t.consecutive_failures]), [
            [withTarget, `${orgId} hooks.example.com`, 2],
            [without, `${orgId} broker.example.com:5673`, 0]
          ])
        }).pipe(Effect.provide(Layer.fresh(database()))),
      60_000
    )
  }
})
