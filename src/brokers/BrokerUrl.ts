/**
 * Broker destinations of notification endpoints: which URLs name one, and
 * what they say.
 *
 * - `amqp://user:pass@host:5672/vhost?exchange=svc.events&routing_key=approvals`
 *   (`amqps://` for TLS, port 5671 by default): RabbitMQ. `exchange` is
 *   required; `routing_key` defaults to the event's type; the path is the
 *   virtual host (`/` when empty; `%2F` for a `/` inside it).
 * - `nats://user:pass@host:4222?subject=svc.approvals` (`tls://` for TLS):
 *   NATS JetStream. `subject` is required and names no wildcard; a token
 *   alone (`nats://token@host`) is a token.
 *
 * Credentials may be in the URL (unlike `https` receivers): the URL is a
 * secret anyway (`src/secrets/ReceiverUrls.ts`) and only the hint (scheme,
 * host, port) is shown. Every other query parameter is refused, so a typo
 * never silently sends elsewhere.
 *
 * Non-special schemes get none of the WHATWG parser's host normalisation
 * (`amqp://0x7f.1` keeps its host as written), so the URL is parsed a
 * second time as `https` with the same rest: the host checks of
 * `TargetUrl.ts` then see the same normalised host an `https` URL would.
 */
import { hostTarget, MAX_URL_LENGTH, type Parsed, parseTarget, type Target } from "../outbound/TargetUrl.ts"

export type BrokerKind = "amqp" | "nats"

export interface BrokerTarget extends Target {
  readonly kind: BrokerKind
  readonly tls: boolean
  readonly username: string
  readonly password: string
  /** AMQP: the virtual host (`/` by default). */
  readonly vhost: string
  /** AMQP: the exchange published to. */
  readonly exchange: string
  /** AMQP: the routing key; `undefined`: the event's type. */
  readonly routingKey: string | undefined
  /** NATS: the subject published to. */
  readonly subject: string
}

/** One message to publish: the event's body bytes and the delivery's signature headers. */
export interface BrokerMessage {
  readonly eventId: string
  readonly type: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: Buffer
  readonly timeoutMs: number
}

/** An open connection to one broker destination (`Amqp.ts`, `Nats.ts`). */
export interface BrokerConnection {
  /** Resolves once the broker acknowledged the message (what it said); rejects with the reason it did not. */
  readonly publish: (message: BrokerMessage) => Promise<string>
  readonly close: () => void
  /** The broker or the network closed it: the next publish opens another. */
  readonly closed: boolean
}

const SCHEMES: Readonly<Record<string, { readonly kind: BrokerKind; readonly tls: boolean; readonly port: number }>> = {
  "amqp:": { kind: "amqp", tls: false, port: 5672 },
  "amqps:": { kind: "amqp", tls: true, port: 5671 },
  "nats:": { kind: "nats", tls: false, port: 4222 },
  "tls:": { kind: "nats", tls: true, port: 4222 }
}

const refuse = (message: string): Parsed => ({ _tag: "Refused", message })

/** A percent-decoded URL part; `undefined` when its escapes are not UTF-8. */
const decoded = (part: string): string | undefined => {
  try {
    return decodeURIComponent(part)
  } catch {
    return undefined
  }
}

/** RabbitMQ's rule for exchange names (and at most 255 characters: an AMQP short string). */
const EXCHANGE = /^[A-Za-z0-9_.:-]{1,255}$/
/** A NATS subject to publish to: dot-separated tokens of printable characters, no wildcard. */
const SUBJECT = /^[^\s.*>]+(\.[^\s.*>]+)*$/
const MAX_SHORT_STRING = 255

const allowed: Readonly<Record<BrokerKind, ReadonlyArray<string>>> = {
  amqp: ["exchange", "routing_key"],
  nats: ["subject"]
}

/** Parses and checks a broker URL as far as that needs no DNS; `Ok` carries a `BrokerTarget`. */
export const parseBrokerUrl = (raw: string): Parsed => {
  if (raw.length > MAX_URL_LENGTH) return refuse(`the URL is longer than ${MAX_URL_LENGTH} characters`)
  let given: URL
  let url: URL
  try {
    given = new URL(raw)
    url = new URL(`https${raw.slice(given.protocol.length - 1)}`)
  } catch {
    return refuse("not a valid absolute URL")
  }
  const scheme = SCHEMES[given.protocol]
  if (scheme === undefined) return refuse("the URL must use https, amqp, amqps, nats or tls")
  const params = url.searchParams
  for (const name of params.keys()) {
    if (!allowed[scheme.kind].includes(name)) {
      return refuse(
        `unknown query parameter ${JSON.stringify(name.slice(0, 40))} (allowed: ${allowed[scheme.kind].join(", ")})`
      )
    }
    if (params.getAll(name).length > 1) return refuse(`the query parameter ${name} is given more than once`)
  }
  const exchange = params.get("exchange") ?? ""
  const routingKey = params.get("routing_key") ?? undefined
  const subject = params.get("subject") ?? ""
  const path = decoded(url.pathname.slice(1))
  const username = decoded(url.username)
  const password = decoded(url.password)
  if (path === undefined || username === undefined || password === undefined) {
    return refuse("the URL's credentials or path have an invalid percent-escape")
  }
  if (scheme.kind === "amqp") {
    if (!EXCHANGE.test(exchange)) {
      return refuse("the query parameter exchange is required: 1 to 255 letters, digits, '-', '_', '.' or ':'")
    }
    if (routingKey !== undefined && Buffer.byteLength(routingKey) > MAX_SHORT_STRING) {
      return refuse(`the query parameter routing_key is longer than ${MAX_SHORT_STRING} bytes`)
    }
    if (Buffer.byteLength(path) > MAX_SHORT_STRING) {
      return refuse(`the virtual host is longer than ${MAX_SHORT_STRING} bytes`)
    }
  } else {
    if (!SUBJECT.test(subject) || subject.length > MAX_SHORT_STRING) {
      return refuse(
        "the query parameter subject is required: dot-separated tokens without spaces or the wildcards * and >"
      )
    }
    if (path !== "") return refuse("a nats URL has no path")
  }
  // `https` drops a port of 443 as its default: the given URL keeps it.
  const port = given.port === "" ? scheme.port : Number(given.port)
  const checked = hostTarget(url, port)
  if (checked._tag === "Refused") return checked
  const host = url.port === "" && given.port !== "" ? `${url.host}:${given.port}` : url.host
  const credentials = url.username === "" ? "" : `${url.username}${url.password === "" ? "" : `:${url.password}`}@`
  const canonical = `${given.protocol}//${credentials}${host}${url.pathname === "/" ? "" : url.pathname}${url.search}`
  const target: BrokerTarget = {
    ...checked.target,
    url: new URL(canonical),
    // Scheme, host and port: the credentials, the virtual host and the query stay hidden.
    hint: `${given.protocol}//${host}/${url.pathname.length > 1 || url.search !== "" ? "…" : ""}`,
    kind: scheme.kind,
    tls: scheme.tls,
    username,
    password,
    vhost: path === "" ? "/" : path,
    exchange,
    routingKey,
    subject
  }
  return { _tag: "Ok", target }
}

/** The URL of a notification endpoint: an `https` receiver or a broker. */
export const parseEndpointUrl = (raw: string): Parsed => {
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(raw)?.[1]?.toLowerCase()
  return scheme === undefined || scheme === "https" ? parseTarget(raw) : parseBrokerUrl(raw)
}
