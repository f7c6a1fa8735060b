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
 * Connections are kept per organization, endpoint URL and checked
 * address, at most `SVC_BROKER_CONNECTIONS` per process and
 * `SVC_BROKER_CONNECTIONS_PER_ORG` of them for one organization (as its
 * `https` requests have pools of their own): the least recently used idle
 * one (of the organization, when it is at its share) is closed to make
 * room. With none idle, a publish waits for a slot within its deadline;
 * a publish that got none fails as `ConnectionsBusy`, a limit of this
 * process and never the broker's failure. Connections are closed after
 * `IDLE_MS` unused.
 *
 * Text a broker sends (errors, acknowledgements) is cut and masked by
 * `fromOutside` before anything else reads it.
 */
import { Clock, Context, Data, Effect, Layer } from "effect"
import { OutboundFailure, OutboundHttp } from "../outbound/OutboundHttp.ts"
import { trustedCas } from "../outbound/Pools.ts"
import { perUrl } from "../outbound/Request.ts"
import { SvcConfig } from "../platform/Config.ts"
import { fromOutside } from "../secrets/Masking.ts"
import { openAmqp } from "./Amqp.ts"
import { type BrokerConnection, type BrokerMessage, type BrokerTarget, parseBrokerUrl } from "./BrokerUrl.ts"
import { openNats } from "./Nats.ts"

/** A connection unused this long is closed. */
export const IDLE_MS = 60_000

/** Which bound kept a publish from getting a connection. */
export type ConnectionLimit = "SVC_BROKER_CONNECTIONS" | "SVC_BROKER_CONNECTIONS_PER_ORG"

/**
 * No connection could be had within the publish's deadline: every one this
 * process (or the organization's share of them) may keep was busy. A limit
 * of this process, not a failure of the broker: never counted against the
 * endpoint.
 */
export class ConnectionsBusy extends Data.TaggedError("ConnectionsBusy")<{
  readonly limit: ConnectionLimit
  readonly limitValue: number
  readonly message: string
}> {}

export interface ConnectionLimits {
  /** Connections one process keeps open at most. */
  readonly total: number
  /** Of those, connections one organization keeps open at most. */
  readonly perOrg: number
}

interface Entry {
  readonly orgId: string
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

/** A publish out of time: whether the broker had not finished its handshake, or had and did not acknowledge. */
const unanswered = (entry: Entry, message: BrokerMessage) =>
  new OutboundFailure({
    reason: "timeout",
    message: entry.connection === undefined
      ? `no connection to the broker within ${message.timeoutMs} ms`
      : `no acknowledgement from the broker within ${message.timeoutMs} ms`
  })

/** The parsed destination of the last URLs published to. */
const targetOf = perUrl(1_000, (url: string) => {
  const parsed = parseBrokerUrl(url)
  return parsed._tag === "Ok" ? parsed.target as BrokerTarget : parsed.message
})

/** A publish started on a connection; boxed, so that resuming with it does not await it. */
interface Started {
  readonly entry: Entry
  readonly published: Promise<string>
}

/** The connections kept, within `limits`, closed after `IDLE_MS` unused. */
export const makeConnections = (now: () => number, limits: ConnectionLimits) => {
  const entries = new Map<string, Entry>()
  const perOrg = new Map<string, number>()
  /** Publishes waiting for a slot, oldest first: each tries again when one may have freed. */
  const waiters = new Set<() => void>()
  let waking = false
  const wake = () => {
    if (waking || waiters.size === 0) return
    waking = true
    queueMicrotask(() => {
      waking = false
      for (const waiter of [...waiters]) waiter()
    })
  }
  const drop = (key: string, entry: Entry) => {
    if (entries.get(key) === entry) {
      entries.delete(key)
      const left = (perOrg.get(entry.orgId) ?? 1) - 1
      if (left > 0) perOrg.set(entry.orgId, left)
      else perOrg.delete(entry.orgId)
      wake()
    }
    entry.opening.then((connection) => connection.close(), () => undefined)
  }
  /** The least recently used idle connection (of `orgId` only, when given). */
  const idlest = (orgId?: string) => {
    let oldest: [string, Entry] | undefined
    for (const pair of entries) {
      const entry = pair[1]
      if (
        entry.inFlight === 0 && (orgId === undefined || entry.orgId === orgId) &&
        (oldest === undefined || entry.lastUsed < oldest[1].lastUsed)
      ) {
        oldest = pair
      }
    }
    return oldest
  }
  /** Makes room for one more connection of `orgId`, closing an idle one if need be; or names the bound that has none. */
  const room = (orgId: string): ConnectionLimit | undefined => {
    if ((perOrg.get(orgId) ?? 0) >= limits.perOrg) {
      const own = idlest(orgId)
      if (own === undefined) return "SVC_BROKER_CONNECTIONS_PER_ORG"
      drop(...own)
    }
    if (entries.size >= limits.total) {
      const any = idlest()
      if (any === undefined) return "SVC_BROKER_CONNECTIONS"
      drop(...any)
    }
    return undefined
  }
  /** The kept connection for `key` (a new one when it has none, or its one closed), taken for one publish; or the bound with no room. */
  const use = (key: string, orgId: string, open: () => Promise<BrokerConnection>): Entry | ConnectionLimit => {
    let entry = entries.get(key)
    // Closed while idle (the broker restarted): replaced, not tried.
    if (entry?.connection?.closed === true) {
      drop(key, entry)
      entry = undefined
    }
    if (entry === undefined) {
      const full = room(orgId)
      if (full !== undefined) return full
      const opening = open()
      entry = { orgId, opening, lastUsed: now(), inFlight: 0 }
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
      perOrg.set(orgId, (perOrg.get(orgId) ?? 0) + 1)
    }
    entry.lastUsed = now()
    entry.inFlight += 1
    return entry
  }
  /** After a publish: a connection the broker or the network closed goes; an idle one may make room for a waiting publish. */
  const settled = (key: string, entry: Entry) => {
    entry.inFlight -= 1
    entry.lastUsed = now()
    entry.opening.then((connection) => connection.closed && drop(key, entry), () => undefined)
    if (entry.inFlight === 0) wake()
  }
  return {
    use,
    settled,
    /**
     * Starts `publish` on the connection for `key`, waiting up to `waitMs`
     * for room; fails as `ConnectionsBusy` naming the bound that had none.
     */
    start: (
      key: string,
      orgId: string,
      open: () => Promise<BrokerConnection>,
      publish: (connection: BrokerConnection) => Promise<string>,
      waitMs: number
    ): Effect.Effect<Started, ConnectionsBusy> =>
      Effect.callback<Started, ConnectionsBusy>((resume) => {
        const begin = (entry: Entry): Started => {
          const published = entry.opening.then(publish)
          published.finally(() => settled(key, entry)).catch(() => undefined)
          return { entry, published }
        }
        const first = use(key, orgId, open)
        if (typeof first !== "string") return resume(Effect.succeed(begin(first)))
        let limit = first
        let timer: ReturnType<typeof setTimeout> | undefined = undefined
        const waiter = () => {
          const entry = use(key, orgId, open)
          if (typeof entry === "string") {
            limit = entry
            return
          }
          waiters.delete(waiter)
          clearTimeout(timer)
          resume(Effect.succeed(begin(entry)))
        }
        waiters.add(waiter)
        timer = setTimeout(() => {
          waiters.delete(waiter)
          const limitValue = limit === "SVC_BROKER_CONNECTIONS" ? limits.total : limits.perOrg
          resume(Effect.fail(
            new ConnectionsBusy({
              limit,
              limitValue,
              message: limit === "SVC_BROKER_CONNECTIONS"
                ? `all ${limitValue} broker connections of this process (${limit}) stayed busy for ${waitMs} ms`
                : `all ${limitValue} broker connections of this organization (${limit}) stayed busy for ${waitMs} ms`
            })
          ))
        }, Math.max(0, Math.floor(waitMs)))
        return Effect.sync(() => {
          waiters.delete(waiter)
          clearTimeout(timer)
        })
      }),
    /** A publish on it ran out of time: a connection that does not acknowledge is not used again. */
    discard: drop,
    sweep: () => {
      const at = now()
      for (const [key, entry] of entries) if (entry.inFlight === 0 && at - entry.lastUsed >= IDLE_MS) drop(key, entry)
    },
    closeAll: () => {
      for (const [key, entry] of entries) drop(key, entry)
    },
    size: () => entries.size,
    waiting: () => waiters.size
  }
}

export class Brokers extends Context.Service<Brokers, {
  /**
   * Publishes `message` to the broker destination `url` and waits for its
   * acknowledgement; `ConnectionsBusy` when no connection could be had in time.
   */
  readonly publish: (
    url: string,
    orgId: string,
    message: BrokerMessage
  ) => Effect.Effect<Published, OutboundFailure | ConnectionsBusy>
}>()("svc/brokers/Brokers") {
  static readonly layer = Layer.effect(
    Brokers,
    Effect.gen(function*() {
      const outbound = yield* OutboundHttp
      const config = yield* SvcConfig
      const clock = yield* Clock.Clock
      const ca = yield* trustedCas(config.extraCaFile._tag === "Some" ? config.extraCaFile.value : undefined)
      const now = () => clock.currentTimeMillisUnsafe()
      const connections = makeConnections(now, {
        total: config.brokerConnections,
        perOrg: config.brokerConnectionsPerOrg
      })
      const sweeper = setInterval(connections.sweep, IDLE_MS / 4)
      sweeper.unref()
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          clearInterval(sweeper)
          connections.closeAll()
        })
      )

      /** One publish, all of it (resolution, a connection, the acknowledgement) by `deadline`. */
      const attempt = (url: string, target: BrokerTarget, orgId: string, message: BrokerMessage, deadline: number) =>
        Effect.gen(function*() {
          yield* Effect.annotateCurrentSpan({ "svc.url_hint": target.hint, "svc.broker": target.kind })
          const addresses = yield* outbound.addresses(target, orgId, message.timeoutMs)
          const address = addresses[0]!.toString()
          // Never shared across organizations.
          const key = `${orgId}\n${url}\n${address}`
          const open = target.kind === "amqp" ? openAmqp : openNats
          const { entry, published } = yield* connections.start(
            key,
            orgId,
            () => open(target, address, ca, Math.max(1, deadline - now())),
            (connection) => connection.publish(message),
            deadline - now()
          )
          return yield* Effect.tryPromise({
            try: () => published,
            catch: (error) =>
              // The NATS client's own timeouts (its connect and its publish
              // get what is left of the deadline) say only "timeout": said
              // as the deadline says it.
              error instanceof Error && error.name === "TimeoutError"
                ? unanswered(entry, message)
                : new OutboundFailure({ reason: "network", message: reasonOf(error) })
          }).pipe(
            // Out of time (e.g. a RabbitMQ that blocks publishers on a resource
            // alarm): its publishes may never be answered, so the connection goes.
            Effect.onInterrupt(() => Effect.sync(() => connections.discard(key, entry))),
            Effect.timeoutOrElse({
              duration: Math.max(1, deadline - now()),
              orElse: () => Effect.fail(unanswered(entry, message))
            })
          )
        })

      const publish = (url: string, orgId: string, message: BrokerMessage) =>
        Effect.gen(function*() {
          const target = targetOf(url)
          if (typeof target === "string") {
            return yield* new OutboundFailure({ reason: "unsafe_target", message: target })
          }
          const started = now()
          // Credentials never reach a message: a broker's error may echo the
          // user name, or the URL with its credentials (masked whatever their length).
          const secrets = [target.username, target.password].filter((value) => value.length >= 4)
          const clean = (text: string) => fromOutside(text, secrets)
          const detail = clean(
            yield* attempt(url, target, orgId, message, started + message.timeoutMs).pipe(
              Effect.mapError((failure) =>
                failure instanceof OutboundFailure
                  ? new OutboundFailure({ reason: failure.reason, message: clean(failure.message) })
                  : failure
              )
            )
          )
          yield* Effect.annotateCurrentSpan("svc.broker_ack", detail)
          return { detail, elapsedMs: now() - started }
        })

      return Brokers.of({ publish })
    })
  )
}
