/**
 * Recently dispatched event bodies, kept in memory so the sender of this
 * process does not read each one back from the database. Only a cache: the
 * `events` table stays the source (another process's sender, or this one
 * after a restart, reads it from there).
 */
import { Context, Effect, Layer } from "effect"

export interface EventBody {
  readonly type: string
  readonly body: string
}

/** Entries kept (oldest dropped first); bodies are small JSON documents. */
const MAX_ENTRIES = 20_000

export class EventBodies extends Context.Service<EventBodies, {
  readonly remember: (id: string, event: EventBody) => void
  readonly get: (id: string) => EventBody | undefined
}>()("svc/notifications/EventBodies") {
  static readonly layer = Layer.effect(
    EventBodies,
    Effect.sync(() => {
      const entries = new Map<string, EventBody>()
      return EventBodies.of({
        remember: (id, event) => {
          entries.set(id, event)
          if (entries.size > MAX_ENTRIES) entries.delete(entries.keys().next().value as string)
        },
        get: (id) => entries.get(id)
      })
    })
  )
}
