/**
 * The bare webhook sender, a child process of its own: an undici pool of
 * `connections` (svc's per-endpoint concurrency) POSTing signed approval
 * events to the receiver, `connections` at a time, nothing recorded.
 */
import { serve } from "../support/child.ts"
import { approvalEvent, type OutboxEvent, signedSender } from "../support/events.ts"

let sender: ReturnType<typeof signedSender> | undefined
let connections = 16
let events: Array<OutboxEvent> = []

serve({
  start: (args: { origin: string; ca: string; connections: number }) => {
    connections = args.connections
    sender = signedSender(args.origin, args.ca, args.connections)
  },
  /** The events of the next burst, made before it (their making is not the sender's cost, as svc's are in its outbox). */
  prepare: ({ orgId, count }: { orgId: string; count: number }) => {
    events = Array.from({ length: count }, () => approvalEvent(orgId))
  },
  burst: async ({ path, secret }: { path: string; secret: string }) => {
    let next = 0
    const started = performance.timeOrigin + performance.now()
    await Promise.all(Array.from({ length: connections }, async () => {
      while (next < events.length) await sender!.send(path, secret, events[next++]!)
    }))
    return { started }
  },
  close: () => sender?.close()
})
