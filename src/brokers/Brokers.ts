/**
 * Publishing to broker destinations (RabbitMQ, NATS JetStream): what the
 * webhook sender does for an endpoint whose URL names a broker
 * (`BrokerUrl.ts`), with the guarantees of an `https` send:
 *
 * - The address checks of every outbound request: the host is resolved at
 *   every publish and every address checked (`OutboundHttp.addresses`,
 *   `SVC_ALLOWED_TARGET_CIDRS`); the connection goes to a checked address.
 * - One deadline (`SVC_WEBHOOK_TIMEOUT`, 5 s) over resolution, connection
 *   and the broker's acknowledgement; no acknowledgement is a failure.
 * - Failure messages never carry the URL's credentials.
 *
 * Connections are kept per endpoint URL and checked address, at most
 * `MAX_CONNECTIONS` per process (the least recently used idle one is
 * closed to make room; with none idle the publish fails, naming the
 * limit), and closed after `IDLE_MS` unused.
 */
import { Clock, Context, Duration, Effect, Layer } from "effect"
import { OutboundFailure, OutboundHttp } from "../outbound/OutboundHttp.ts"
import { trustedCas } from "../outbound/Pools.ts"
import { perUrl } from "../outbound/Request.ts"
import { SvcConfig } from "../platform/Config.ts"
import { maskNeedles, maskUserinfo } from "../secrets/Masking.ts"
import { openAmqp } from "./Amqp.ts"
import { type BrokerConnection, type BrokerMessage, type BrokerTarget, parseBrokerUrl } from "./BrokerUrl.ts"
import { openNats } from "./Nats.ts"

/** Broker connections one process keeps open at most. */
export const MAX_CONNECTIONS = 256
/** A connection unused this long is closed. */
export const IDLE_MS = 60_000

interface Entry {
  readonly opening: Promise<BrokerConnection>
  /** Once open. */
  connection?: BrokerConnection
  lastUsed: number
  inFlight: number
}

export interface Published {
  /** What the broker said: its acknowledgement. */
  readonly detail: string
  readonly elapsedMs: number
}

const reasonOf = (error: unknown): string => error instanceof Error ? error.message : String(error)

/** The parsed destination of the last URLs published to. */
const targetOf = perUrl(1_000, (url: string) => {
  const parsed = parseBrokerUrl(url)
  return parsed._tag === "Ok" ? parsed.target as BrokerTarget : parsed.message
})

/** The connections kept, at most `max`, closed after `IDLE_MS` unused. */
export const makeConnections = (now: () => number, max = MAX_CONNECTIONS) => {
  const entries = new Map<string, Entry>()
  const drop = (key: string, entry: Entry) => {
    if (entries.get(key) === entry) entries.delete(key)
    entry.opening.then((connection) => connection.close(), () => undefined)
  }
  /** Makes room for one more: closes the least recently used idle connection; `false` when none is idle. */
  const room = () => {
    if (entries.size < max) return true
    let oldest: [string, Entry] | undefined
    for (const pair of entries) if (pair[1].inFlight === 0 && (oldest === undefined || pair[1].lastUsed < oldest[1].lastUsed)) oldest = pair
    if (oldest === undefined) return false
    drop(...oldest)
    return true
  }
  return {
    /** The kept connection for `key` (a new one when it has none, or its one closed); `undefined` when none can be opened. */
    use: (key: string, open: () => Promise<BrokerConnection>): Entry | undefined => {
      let entry = entries.get(key)
      // Closed while idle (the broker restarted): replaced, not tried.
      if (entry?.connection?.closed === true) {
        drop(key, entry)
        entry = undefined
      }
      if (entry === undefined) {
        if (!room()) return undefined
        const opening = open()
        entry = { opening, lastUsed: now(), inFlight: 0 }
        const created = entry
        // A connection that failed to open, or closed later, is not kept.
        opening.then(
          (connection) => {
            created.connection = connection
            if (connection.closed) drop(key, created)
          },
          () => drop(key, created)
        )
        entries.set(key, entry)
      }
      entry.lastUsed = now()
      return entry
    },
    /** After a publish: a connection the broker or the network closed goes. */
    /** A publish on it ran out of time: a connection that does not acknowledge is not used again. */
    discard: drop,
    settled: (key: string, entry: Entry) => {
      entry.inFlight -= 1
      entry.lastUsed = now()
      entry.opening.then((connection) => connection.closed && drop(key, entry), () => undefined)
    },
    sweep: () => {
      const at = now()
      for (const [key, entry] of entries) if (entry.inFlight === 0 && at - entry.lastUsed >= IDLE_MS) drop(key, entry)
    },
    closeAll: () => {
      for (const [key, entry] of entries) drop(key, entry)
    },
    size: () => entries.size
  }
}

export class Brokers extends Context.Service<Brokers, {
  /** Publishes `message` to the broker destination `url` and waits for its acknowledgement. */
  readonly publish: (url: string, orgId: string, message: BrokerMessage) => Effect.Effect<Published, OutboundFailure>
}>()("svc/brokers/Brokers") {
  static readonly layer = Layer.effect(
    Brokers,
    Effect.gen(function*() {
      const outbound = yield* OutboundHttp
      const config = yield* SvcConfig
      const clock = yield* Clock.Clock
      const ca = yield* trustedCas(config.extraCaFile._tag === "Some" ? config.extraCaFile.value : undefined)
      const now = () => clock.currentTimeMillisUnsafe()
      const connections = makeConnections(now)
      const sweeper = setInterval(connections.sweep, IDLE_MS / 4)
      sweeper.unref()
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          clearInterval(sweeper)
          connections.closeAll()
        })
      )

      const attempt = (url: string, target: BrokerTarget, orgId: string, message: BrokerMessage) =>
        Effect.gen(function*() {
          yield* Effect.annotateCurrentSpan({ "svc.url_hint": target.hint, "svc.broker": target.kind })
          const addresses = yield* outbound.addresses(target, orgId, message.timeoutMs)
          const address = addresses[0]!.toString()
          const key = `${url}\n${address}`
          const open = target.kind === "amqp" ? openAmqp : openNats
          const entry = connections.use(key, () => open(target, address, ca, message.timeoutMs))
          if (entry === undefined) {
            return yield* new OutboundFailure({
              reason: "network",
              message: `this process has ${MAX_CONNECTIONS} broker connections open, all busy (the most kept)`
            })
          }
          entry.inFlight += 1
          const published = entry.opening.then((connection) => connection.publish(message))
          published.finally(() => connections.settled(key, entry)).catch(() => undefined)
          const detail = yield* Effect.tryPromise({
            try: () => published,
            catch: (error) => new OutboundFailure({ reason: "network", message: reasonOf(error) })
          }).pipe(
            // Out of time (e.g. a RabbitMQ that blocks publishers on a resource
            // alarm): its publishes may never be answered, so the connection goes.
            Effect.onInterrupt(() => Effect.sync(() => connections.discard(key, entry)))
          )
          yield* Effect.annotateCurrentSpan("svc.broker_ack", detail)
          return detail
        })

      const publish = (url: string, orgId: string, message: BrokerMessage) =>
        Effect.gen(function*() {
          const target = targetOf(url)
          if (typeof target === "string") return yield* new OutboundFailure({ reason: "unsafe_target", message: target })
          const started = now()
          // Credentials never reach a message: a broker's error may echo the
          // user name, or the URL with its credentials (masked whatever their length).
          const secrets = [target.username, target.password].filter((value) => value.length >= 4)
          const clean = (text: string) => maskNeedles(maskUserinfo(text), secrets)
          const detail = yield* attempt(url, target, orgId, message).pipe(
            Effect.timeoutOrElse({
              duration: Duration.millis(message.timeoutMs),
              orElse: () =>
                Effect.fail(new OutboundFailure({
                  reason: "timeout",
                  message: `no acknowledgement from the broker within ${message.timeoutMs} ms`
                }))
            }),
            Effect.mapError((failure) => new OutboundFailure({ reason: failure.reason, message: clean(failure.message) }))
          )
          return { detail: clean(detail), elapsedMs: now() - started }
        })

      return Brokers.of({ publish })
    })
  )
}
