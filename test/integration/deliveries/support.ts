/** What the delivery queue's tests share: the queue on its own database, an organization, attempt records. */
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { Database } from "../../../src/database/Database.ts"
import { Migrations } from "../../../src/database/Migrations.ts"
import { Wakeups } from "../../../src/database/Wakeups.ts"
import { DeliveryQueue } from "../../../src/deliveries/DeliveryQueue.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { memoryDatabase } from "../../support/databases.ts"

/** A PostgreSQL server when set (a scratch database on it), else in-memory PGlite. */
export const serverUrl = process.env.TEST_DATABASE_URL

/** The queue over a migrated database of the test file's own. */
export const QueueLive = DeliveryQueue.layer.pipe(
  Layer.provideMerge(Wakeups.layer),
  Layer.provideMerge(Migrations.layer),
  Layer.provideMerge(
    serverUrl
      ? Database.scratch(Redacted.make(serverUrl), { template: process.env.TEST_DATABASE_TEMPLATE })
      : memoryDatabase()
  )
)

/** A new organization (deliveries and targets belong to one). */
export const newOrg = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const id = newId()
  yield* sql`INSERT INTO orgs (id, name) VALUES (${id}, 'delivery-test')`
  return id
}).pipe(Effect.orDie)

export const ok = { statusCode: 204, durationMs: 1 }
export const boom = { statusCode: 500, error: "HTTP 500", durationMs: 1 }
