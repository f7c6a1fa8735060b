/**
 * Fans the durable approval event log (`events`, the outbox) out into
 * deliveries: one per subscribed active endpoint of the event's
 * organization, and one reviewer email for requests and deadline notices
 * when reviewer email is configured. Events are taken undispatched, in
 * `seq` order, and marked `dispatched_at` in the same short transaction that
 * creates their deliveries: an event is fanned out exactly once, and a crash
 * before commit leaves it for the next pass (in any process).
 */
import { PgClient } from "@effect/sql-pg"
import { Cause, Context, Duration, Effect, Layer, Option } from "effect"
import { EmailedEventTypes, type EventType } from "../api/Notifications.ts"
import { DeliveryQueue, type EnqueueInput } from "../deliveries/DeliveryQueue.ts"
import { SvcConfig } from "../platform/Config.ts"
import { Topics, Wakeups } from "../platform/Wakeups.ts"
import { EventBodies } from "./EventBodies.ts"

/** `Wakeups` topic the event producer signals after committing events. */
export const EVENTS_TOPIC = Topics.events

/** Events fanned out per transaction: keeps transactions short (PGlite is one session). */
const BATCH = 200
const POLL_EVERY = Duration.seconds(1)

interface EventRow {
  readonly seq: string
  readonly id: string
  readonly org_id: string
  readonly type: string
  readonly body: string
}

/** The approval id for the delivery label; a body we cannot read still gets delivered (and labelled by type). */
const approvalIdOf = (body: string): string | undefined => {
  try {
    const parsed = JSON.parse(body) as { approval?: { approval_id?: unknown } }
    return typeof parsed.approval?.approval_id === "string" ? parsed.approval.approval_id : undefined
  } catch {
    return undefined
  }
}

interface EndpointRow {
  readonly id: string
  readonly org_id: string
  readonly events: ReadonlyArray<string>
}

/** Two dispatchers (processes) never interleave, so deliveries are created in event order. */
const DISPATCH_LOCK = 7_300_001

export class Dispatcher extends Context.Service<Dispatcher, {
  /** Fans out one batch of undispatched events; answers how many events it took. */
  readonly dispatchOnce: Effect.Effect<number>
}>()("svc/notifications/Dispatcher") {
  static readonly layer = Layer.effect(
    Dispatcher,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const queue = yield* DeliveryQueue
      const config = yield* SvcConfig
      const bodies = yield* EventBodies
      const smtp = Option.isSome(config.smtpUrl)
      const emailed = new Set<string>(EmailedEventTypes)

      const dispatchOnce = Effect.gen(function*() {
        const result = yield* sql.withTransaction(Effect.gen(function*() {
          const [lock] = yield* sql<{ locked: boolean }>`SELECT pg_try_advisory_xact_lock(${DISPATCH_LOCK}) AS locked`
          if (lock?.locked !== true) return { events: 0, webhooks: 0, emails: 0, bodies: [] }
          const events = yield* sql<EventRow>`
            SELECT seq, id, org_id, type, body
            FROM events WHERE dispatched_at IS NULL
            ORDER BY seq LIMIT ${BATCH}
            FOR UPDATE SKIP LOCKED
          `
          if (events.length === 0) return { events: 0, webhooks: 0, emails: 0, bodies: [] }
          const orgs = [...new Set(events.map((event) => event.org_id))]
          const endpoints = yield* sql<EndpointRow>`
            SELECT id, org_id, events FROM notification_endpoints
            WHERE active AND org_id IN ${sql.in(orgs)}
            ORDER BY seq
          `
          const reviewers = smtp
            ? new Set((yield* sql<{ org_id: string }>`
                SELECT org_id FROM notification_settings
                WHERE reviewer_email IS NOT NULL AND org_id IN ${sql.in(orgs)}
              `).map((row) => row.org_id))
            : new Set<string>()
          const deliveries: Array<EnqueueInput> = []
          let webhooks = 0
          let emails = 0
          for (const event of events) {
            const label = `${event.type} ${approvalIdOf(event.body) ?? ""}`.trim()
            for (const endpoint of endpoints) {
              if (endpoint.org_id !== event.org_id || !endpoint.events.includes(event.type)) continue
              deliveries.push({
                orgId: event.org_id,
                kind: "webhook",
                targetId: endpoint.id,
                label,
                eventId: event.id,
                capacity: config.webhookQueueCapacity
              })
              webhooks++
            }
            if (reviewers.has(event.org_id) && emailed.has(event.type as EventType)) {
              deliveries.push({
                orgId: event.org_id,
                kind: "email",
                targetId: event.org_id,
                label,
                eventId: event.id,
                capacity: config.webhookQueueCapacity
              })
              emails++
            }
          }
          yield* queue.enqueueAll(deliveries)
          yield* sql`UPDATE events SET dispatched_at = now() WHERE seq IN ${sql.in(events.map((event) => event.seq))}`
          return { events: events.length, webhooks, emails, bodies: events }
        })).pipe(Effect.orDie)
        for (const event of result.bodies) bodies.remember(event.id, { type: event.type, body: event.body })
        if (result.webhooks > 0) yield* queue.wake("webhook")
        if (result.emails > 0) yield* queue.wake("email")
        return result.events
      }).pipe(Effect.withSpan("Notifications.dispatch"))

      return Dispatcher.of({ dispatchOnce })
    })
  )

  /** The dispatch loop: a batch at a time; when none is left, waits for an `events` wakeup or the poll interval. */
  static readonly worker = Layer.effectDiscard(Effect.gen(function*() {
    const dispatcher = yield* Dispatcher
    const wakeups = yield* Wakeups
    yield* Effect.gen(function*() {
      const taken = yield* dispatcher.dispatchOnce
      if (taken < BATCH) yield* wakeups.wait(EVENTS_TOPIC, POLL_EVERY)
    }).pipe(
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.failCause(cause)
          : Effect.logError("event dispatch failed; retrying", Cause.squash(cause)).pipe(
            Effect.andThen(Effect.sleep(POLL_EVERY))
          )
      ),
      Effect.forever,
      Effect.forkScoped
    )
  }))
}
