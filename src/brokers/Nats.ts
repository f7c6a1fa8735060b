/**
 * NATS JetStream publishing with the official client
 * (`@nats-io/transport-node`, `@nats-io/jetstream`): one connection per
 * destination (cached by `Brokers.ts`).
 *
 * A publish is delivered only when a stream acknowledged it (`PubAck`). No
 * stream for the subject means nobody answers the publish: a failure, like
 * a timeout or an error answer. The message id (`Nats-Msg-Id`) is the event
 * id, so a stream drops a retry's duplicate within its duplicate window.
 * The delivery's signature headers (`Signing.ts`) travel as NATS headers,
 * with the names and values an `https` receiver gets.
 *
 * The connection goes to the checked address only: no reconnects and no
 * cluster updates (a server could otherwise point the client at addresses
 * nobody checked); a closed connection is dropped from the cache. The
 * server's greeting is bounded (`NatsTransport.ts`).
 */
import { cutOutside } from "../secrets/Masking.ts"
import type { BrokerConnection, BrokerMessage, BrokerTarget } from "./BrokerUrl.ts"
import { connectBounded } from "./NatsTransport.ts"

const reasonOf = (error: unknown): string => error instanceof Error ? error.message : String(error)

/** Opens the connection to `address` (checked by the caller), with the URL's host as the TLS server name. */
export const openNats = async (
  target: BrokerTarget,
  address: string,
  ca: ReadonlyArray<string>,
  timeoutMs: number
): Promise<BrokerConnection> => {
  const credentials = target.username === ""
    ? {}
    : target.password === ""
    ? { token: target.username }
    : { user: target.username, pass: target.password }
  // Loaded on first use: a service without NATS destinations never pays for it.
  const [{ jetstream }, { headers }] = await Promise.all([
    import("@nats-io/jetstream"),
    import("@nats-io/transport-node")
  ])
  const connection = await connectBounded({
    servers: `${address.includes(":") ? `[${address}]` : address}:${target.port}`,
    ...credentials,
    name: "svc",
    timeout: timeoutMs,
    reconnect: false,
    ignoreClusterUpdates: true,
    noEcho: true,
    // The client passes its TLS options on to `tls.connect` (the server name too, which its types leave out).
    tls: target.tls ? { servername: target.url.hostname, ca: ca.join("\n") } as { readonly ca: string } : null
  }).catch((error: unknown) => {
    // A server that requires TLS makes the client start it even when told
    // not to, and it fails reading the TLS options it was not given (a
    // `TypeError`, the cause of its connection error): what that means, instead.
    const cause = error instanceof Error ? error.cause : undefined
    throw !target.tls && (error instanceof TypeError || cause instanceof TypeError)
      ? new Error("the server requires TLS: use tls:// instead of nats://")
      : error
  })
  let closed = false
  void connection.closed().then(() => {
    closed = true
  })
  const js = jetstream(connection)
  return {
    get closed() {
      return closed || connection.isClosed()
    },
    close: () => {
      closed = true
      connection.close().catch(() => undefined)
    },
    publish: async (message: BrokerMessage) => {
      const sent = headers()
      for (const [name, value] of Object.entries(message.headers)) sent.set(name, value)
      try {
        const ack = await js.publish(target.subject, message.body, {
          msgID: message.eventId,
          headers: sent,
          timeout: message.timeoutMs,
          retries: 1
        })
        return `acknowledged by JetStream stream ${cutOutside(ack.stream).text} (seq ${ack.seq}${
          ack.duplicate ? ", duplicate" : ""
        })`
      } catch (error) {
        // Cut before it is read: the text is the server's.
        const reason = cutOutside(reasonOf(error)).text
        // The client reads "no responders" as JetStream being off; for a
        // publish it means no stream takes the subject.
        throw new Error(
          /no responders|not enabled/i.test(reason)
            ? `no JetStream stream acknowledged the publish: no stream takes subject ${target.subject}`
            : `JetStream did not acknowledge the publish: ${reason}`,
          { cause: error }
        )
      }
    }
  }
}
