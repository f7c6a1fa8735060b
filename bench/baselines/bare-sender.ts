/**
 * The bare webhook sender, a child process of its own: an undici pool of
 * `connections` (svc's per-endpoint concurrency) POSTing signed approval
 * events to the receiver, `connections` at a time, nothing recorded.
 */
import { serve } from "../support/child.ts"
import { approvalEvent, signedSender } from "../support/events.ts"

let sender: ReturnType<typeof signedSender> | undefined
let connections = 16

serve({
  start: (args: { origin: string; ca: string; connections: number }) => {
    connections = args.connections
    sender = signedSender(args.origin, args.ca, args.connections)
  },
  burst: async ({ path, secret, orgId, count }: { path: string; secret: string; orgId: string; count: number }) => {
    const events = Array.from({ length: count }, () => approvalEvent(orgId))
    let next = 0
    const started = performance.timeOrigin + performance.now()
    await Promise.all(Array.from({ length: connections }, async () => {
      while (next < events.length) await sender!.send(path, secret, events[next++]!)
    }))
    return { started }
  },
  close: () => sender?.close()
})
