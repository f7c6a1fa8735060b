/**
 * The bare webhook sender, a child process of its own: an undici pool of
 * `connections` (svc's per-endpoint concurrency) POSTing signed approval
 * events to the receiver, `connections` at a time, nothing recorded.
 *
 * With `origins` (one per endpoint, as svc's endpoints are spread over
 * organizations and hosts) it keeps a pool per endpoint, as svc keeps one
 * per organization and host, and sends event k to endpoint k mod their
 * number: it pays the same connections and handshakes svc does.
 */
import { serve } from "../support/child.ts"
import { approvalEvent, type OutboxEvent, signedSender } from "../support/events.ts"

let senders: Array<ReturnType<typeof signedSender>> = []
let connections = 16
let events: Array<OutboxEvent> = []

serve({
  start: (args: { origin: string; ca: string; connections: number; origins?: ReadonlyArray<string> }) => {
    connections = args.connections
    senders = (args.origins ?? [args.origin]).map((origin) => signedSender(origin, args.ca, args.connections))
  },
  /** The events of the next burst, made before it (their making is not the sender's cost, as svc's are in its outbox). */
  prepare: ({ orgId, count }: { orgId: string; count: number }) => {
    events = Array.from({ length: count }, () => approvalEvent(orgId))
  },
  burst: async ({ path, secret }: { path: string; secret: string }) => {
    let next = 0
    const started = performance.timeOrigin + performance.now()
    await Promise.all(Array.from({ length: connections }, async () => {
      while (next < events.length) {
        const k = next++
        await senders[k % senders.length]!.send(path, secret, events[k]!)
      }
    }))
    return { started }
  },
  close: () => Promise.all(senders.map((sender) => sender.close()))
})
