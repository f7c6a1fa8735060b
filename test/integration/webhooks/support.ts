/** Shared pieces of the webhook tests: a service that reaches loopback receivers, and events written straight into the outbox. */
import { Duration, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { SvcConfigShape } from "../../../src/platform/Config.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { SvcTest } from "../../../src/testing.ts"
import { eventually } from "../../support/http.ts"
import { loopbackTargets, TestTls } from "../../support/tls.ts"

/** The service trusting the test CA and reaching loopback, with short retry delays unless told otherwise. */
export const webhookService = (config: Partial<SvcConfigShape> = {}) =>
  Layer.unwrap(Effect.gen(function*() {
    const tls = yield* TestTls.shared
    return SvcTest.layer({
      config: {
        ...loopbackTargets(tls),
        webhookRetrySchedule: [Duration.millis(100), Duration.millis(100), Duration.millis(100)],
        webhookCooldownAfter: 50,
        webhookCooldownBase: Duration.seconds(1),
        webhookCooldownMax: Duration.seconds(2),
        ...config
      }
    })
  }))

export type EventType =
  | "approval.requested"
  | "approval.expiring"
  | "approval.escalated"
  | "approval.approved"
  | "approval.rejected"
  | "approval.expired"

/** An event body as the approvals capability writes it (docs/webhooks.md, "Events"). */
export const eventBody = (orgId: string, type: EventType, approvalId: string = newId()) => {
  const now = new Date()
  const decided = type === "approval.approved" || type === "approval.rejected"
  return {
    id: newId(),
    type,
    org_id: orgId,
    occurred_at: now.toISOString(),
    approval: {
      approval_id: approvalId,
      session_id: newId(),
      step_id: "step-1",
      task_id: null,
      status: decided
        ? (type === "approval.approved" ? "approved" : "rejected")
        : type === "approval.expired"
        ? "expired"
        : "pending",
      deadline_at: new Date(now.getTime() + 600_000).toISOString(),
      expires_at: new Date(now.getTime() + 1_200_000).toISOString(),
      timeout_action: "reject",
      ...(decided ? { decided_at: now.toISOString(), decided_by: "reviewer@example.com" } : {})
    }
  }
}

export type EventBody = ReturnType<typeof eventBody>

/**
 * Writes events into the outbox as the approvals capability does (the
 * dispatcher picks them up by polling). One transaction, so the dispatcher
 * sees all of them at once: otherwise it may fan out the first before the
 * rest exist, and a test whose first delivery changes the endpoint (410)
 * would race its own inserts.
 */
export const insertEvents = (events: ReadonlyArray<EventBody>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql.withTransaction(Effect.forEach(events, (event) =>
      sql`
        INSERT INTO events (id, org_id, type, occurred_at, body, label)
        VALUES (${event.id}, ${event.org_id}, ${event.type}, ${event.occurred_at}, ${JSON.stringify(event)},
                ${`${event.type} ${event.approval.approval_id}`})
      `, { discard: true }))
    return events.map((event) => JSON.stringify(event))
  }).pipe(Effect.orDie)

export interface DeliveryRow {
  readonly id: string
  readonly status: string
  readonly attempts: number
  readonly replays: number
  readonly last_error: string | null
  readonly event_id: string
  readonly payload: string | null
  readonly next_attempt_at: Date
}

/** Deliveries of an endpoint straight from the database (also after the endpoint is gone). */
export const deliveryRows = (endpointId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<DeliveryRow>`
      SELECT id, status, attempts, replays, last_error, event_id, payload, next_attempt_at
      FROM delivery_records WHERE target_id = ${endpointId} ORDER BY seq
    `
  }).pipe(Effect.orDie)

/** Polls until the endpoint's deliveries satisfy `predicate`. */
export const waitForDeliveries = (
  endpointId: string,
  predicate: (rows: ReadonlyArray<DeliveryRow>) => boolean,
  what = "deliveries",
  timeoutMs = 20_000
) =>
  eventually(
    Effect.map(deliveryRows(endpointId), (rows) => (predicate(rows) ? rows : undefined)),
    { what, timeoutMs, intervalMs: 50 }
  )
