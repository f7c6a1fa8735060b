/**
 * Fans the durable approval event log (`events`, the outbox: its rows and
 * cursor are `outbox/Outbox.ts`'s) out into
 * deliveries: one per subscribed active endpoint of the event's
 * organization, and reviewer email for requests and deadline notices when
 * reviewer email is configured: to the organization's confirmed address,
 * or, for an approval assigned to a reviewer group, one to each of the
 * group's members' confirmed own addresses. Events are taken past the dispatch
 * cursor (`event_dispatch`, migration 0720) in `(writer, seq)` order, and
 * the cursor is moved past them by the same statement that creates their
 * deliveries: an event is fanned out exactly once, and a crash before it
 * commits leaves it for the next pass (in any process).
 */
import { PgClient } from "@effect/sql-pg"
import { Cause, Clock, Context, Duration, Effect, Layer, Option, Schema } from "effect"
import { EmailedEventTypes } from "../../api/Notifications.ts"
import { MEMBER_META_KEY, memberAddressStands } from "../../approvals/MemberAddresses.ts"
import { Topics, Wakeups } from "../../database/Wakeups.ts"
import { DeliveryQueue } from "../../deliveries/DeliveryQueue.ts"
import { heldPastPass } from "../../outbox/HeldPastPass.ts"
import { takeEvents } from "../../outbox/Outbox.ts"
import { SvcConfig } from "../../platform/Config.ts"
import { BigIntText } from "../../platform/Rows.ts"
import { FIRST_BATCH, gatherFor, nextBatch, type Pass, pauseAfter, recentPasses } from "./DispatchBatches.ts"
import { EventBodies } from "./EventBodies.ts"
import { passWakeups } from "./PassWakeups.ts"

const POLL_EVERY = Duration.seconds(1)

/**
 * An event fanned out, with how many deliveries of each kind the statement
 * queued (and of the webhooks, how many on their own, not the log's) and
 * whether events still wait past the cursor (`held`); a pass that took
 * none answers one row of nulls beside `held`.
 */
const DispatchedRow = Schema.Struct({
  seq: Schema.NullOr(BigIntText),
  id: Schema.NullOr(Schema.String),
  type: Schema.NullOr(Schema.String),
  body: Schema.NullOr(Schema.String),
  webhooks: Schema.Number,
  webhooks_alone: Schema.Number,
  emails: Schema.Number,
  held: Schema.Boolean
})

/** What one pass did. */
export interface Dispatched {
  /** Events fanned out. */
  readonly taken: number
  /** Whether committed events past the cursor wait for older transactions to end (the horizon of `undispatchedEvents`). */
  readonly held: boolean
}

/** Two dispatchers (processes) never interleave, so deliveries are created in event order. */
export const DISPATCH_LOCK = 7_300_001

export class Dispatcher extends Context.Service<Dispatcher, {
  /** Fans out up to `batch` undispatched events in one statement. */
  readonly dispatchOnce: (batch: number) => Effect.Effect<Dispatched>
}>()("svc/notifications/Dispatcher") {
  static readonly layer = Layer.effect(
    Dispatcher,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const queue = yield* DeliveryQueue
      const wakeups = yield* Wakeups
      const config = yield* SvcConfig
      const bodies = yield* EventBodies
      const smtp = Option.isSome(config.smtpUrl)
      const emailedTypes: Array<string> = [...EmailedEventTypes]
      /** The group the event's approval is assigned to (its snapshot's), or null. */
      const assignedGroup = sql`(ev.body::jsonb #>> '{approval,assigned_group}')`
      const woken = passWakeups(sql, wakeups)

      // One statement, so one round trip and no transaction held open on the
      // embedded database's only session: take the events past the cursor
      // (the advisory lock keeps two dispatchers from interleaving; one that
      // finds it held takes nothing), move the cursor past them (or mark
      // those held back too long), and enqueue their deliveries. All of it
      // commits together or not at all.
      const dispatchOnce = (batch: number) =>
        Effect.gen(function*() {
          const rows = yield* queue.enqueueFrom(
            {
              with: sql`
            ${takeEvents(sql, batch, DISPATCH_LOCK)},
            fan AS (
              -- Per event in order: its organization's subscribed active
              -- endpoints in their order, then the reviewer email (to a
              -- confirmed address only).
              SELECT ev.writer AS event_writer, ev.seq AS event_seq, 0 AS k, ep.seq AS ep_seq, ev.org_id, 'webhook'::text AS kind,
                     ep.id AS target_id, ev.id AS event_id, ev.type, ev.body, ev.label, '{}'::jsonb AS meta
              FROM ev JOIN notification_endpoints ep
                ON ep.org_id = ev.org_id AND ep.active AND ep.events @> to_jsonb(ev.type)
                -- An operational event never goes to the endpoint it is about.
                AND ep.id IS DISTINCT FROM ev.about_endpoint
                -- An endpoint with an action class filter gets the approval
                -- events of those classes only; the class is looked up for
                -- such endpoints alone (OR evaluates left to right). An entry
                -- is an action class, matched exactly, or a prefix ending in
                -- '.*' ('payments.*' matches 'payments.refund' and
                -- 'payments.card.capture', not 'payments'); a NULL class none.
                AND (ep.action_classes IS NULL OR ev.about_endpoint IS NOT NULL OR coalesce((
                  SELECT bool_or(CASE WHEN right(f.entry, 2) = '.*' THEN starts_with(c.cls, left(f.entry, -1)) ELSE f.entry = c.cls END)
                  FROM (SELECT (
                    SELECT s.action_class FROM approvals a
                    JOIN agent_steps s ON s.session_id = a.session_id AND s.step_id = a.step_id
                    WHERE a.id = (ev.body::jsonb #>> '{approval,approval_id}')::uuid) AS cls) c,
                  jsonb_array_elements_text(ep.action_classes) AS f(entry)), false))
              UNION ALL
              SELECT ev.writer, ev.seq, 1, 0, ev.org_id, 'email', ev.org_id, ev.id, ev.type, ev.body, ev.label, '{}'::jsonb
              FROM ev JOIN notification_settings ns
                ON ns.org_id = ev.org_id AND ns.reviewer_email IS NOT NULL AND ns.reviewer_confirmed_at IS NOT NULL
              WHERE ${smtp} AND ev.type IN ${sql.in(emailedTypes)} AND ${assignedGroup} IS NULL
              UNION ALL
              -- An approval assigned to a group (at this event: after each
              -- escalation, the chain's group it was handed to) is mailed to each of its
              -- members' confirmed own addresses instead, one delivery each.
              SELECT ev.writer, ev.seq, 2, 0, ev.org_id, 'email', ev.org_id, ev.id, ev.type, ev.body, ev.label,
                     jsonb_build_object(${MEMBER_META_KEY}::text, a.address_id)
              FROM ev JOIN reviewer_groups g ON g.org_id = ev.org_id AND g.name = ${assignedGroup}
              JOIN reviewer_group_members m ON m.group_id = g.id
              JOIN reviewer_member_addresses a ON a.org_id = ev.org_id AND a.member = m.member AND ${
                sql.literal(memberAddressStands("a"))
              }
              WHERE ${smtp} AND ev.type IN ${sql.in(emailedTypes)}
            )`,
              // The label was written with the event (its type and approval id);
              // an event written without one is labelled by its type.
              input: sql`
            SELECT row_number() OVER (ORDER BY event_writer, event_seq, k, ep_seq) AS ord, org_id, kind, target_id,
                   coalesce(label, type) AS label,
                   event_id, NULL::text AS payload, meta, ${config.webhookQueueCapacity}::int AS capacity
            FROM fan`,
              select: sql`
            SELECT ev.seq, ev.id, ev.type, ev.body,
                   (SELECT count(*) FROM inserted WHERE kind = 'webhook')::int AS webhooks,
                   (SELECT count(*) FROM inserted WHERE kind = 'webhook' AND status <> 'logged')::int AS webhooks_alone,
                   (SELECT count(*) FROM inserted WHERE kind = 'email')::int AS emails,
                   h.held ${woken.columns}
            FROM (SELECT ${heldPastPass(sql)} AS held) h LEFT JOIN ev ON true ORDER BY ev.writer, ev.seq`
            },
            "events",
            DispatchedRow
          )
          let taken = 0
          for (const event of rows) {
            if (event.id === null) continue
            taken++
            bodies.remember(event.id, { type: event.type!, body: event.body! })
          }
          const emails = rows[0]?.emails ?? 0
          yield* woken.wake({
            webhook: { all: rows[0]?.webhooks ?? 0, alone: rows[0]?.webhooks_alone ?? 0 },
            email: { all: emails, alone: emails }
          })
          return { taken, held: rows[0]?.held ?? false }
        }).pipe(Effect.withSpan("Dispatcher.dispatchOnce"))

      return Dispatcher.of({ dispatchOnce })
    })
  )

  /**
   * The dispatch loop: a batch at a time, growing through a burst
   * (`DispatchBatches.ts`); when none is left, waits for an `events` wakeup
   * or the poll interval.
   */
  static readonly worker = Layer.effectDiscard(Effect.gen(function*() {
    const dispatcher = yield* Dispatcher
    const wakeups = yield* Wakeups
    let batch = FIRST_BATCH
    /** The last pause waited for held-back events; undefined once the dispatcher has caught up. */
    let pause: Duration.Duration | undefined
    /** The passes of the last moment that took events: a steady stream's next commits gather (`DispatchBatches.ts`). */
    let passes: Array<Pass> = []
    const thenGather = (wait: Effect.Effect<void>) =>
      Effect.gen(function*() {
        yield* wait
        const gather = gatherFor(passes, yield* Clock.currentTimeMillis)
        if (gather !== undefined) yield* Effect.sleep(gather)
      })
    yield* Effect.gen(function*() {
      const size = batch
      const { held, taken } = yield* dispatcher.dispatchOnce(size)
      passes = recentPasses(passes, { at: yield* Clock.currentTimeMillis, taken })
      batch = nextBatch(size, taken)
      if (taken >= size) pause = undefined
      else if (held) {
        // Committed events wait for older transactions to end. After a pass
        // that took some, they are ending: mostly other writers of events,
        // whose commit wakes this loop. After one that took none, the
        // holder may write no events at all: the pause alone, so that a
        // held horizon costs no statements per commit.
        pause = pauseAfter(pause, taken)
        yield* taken > 0 ? thenGather(wakeups.wait(Topics.events, pause)) : Effect.sleep(pause)
      } else {
        pause = undefined
        yield* thenGather(wakeups.wait(Topics.events, POLL_EVERY))
      }
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
