/**
 * The NATS client's connection, bounded against a server that answers with
 * garbage. `@nats-io/transport-node` (3.4) reads the server's greeting
 * (`INFO {...}\r\n`) by joining every chunk received so far and searching
 * the whole for the line's end, at each chunk, with no limit; and a
 * connection that fails before the greeting is read (the client's own
 * timeout) leaves its socket open. A server that sends an endless first
 * line therefore held one core and a growing buffer long after the publish
 * had failed: another organization's requests waited 3 s and more, for as
 * long as the server kept sending.
 *
 * Here the greeting may be at most `MAX_GREETING_BYTES` (a real server's is
 * under 2 KiB; a cluster's list of other servers, which svc ignores, adds
 * a few dozen bytes each): past it the socket is destroyed, which fails the
 * connection. A connection closed before it was established destroys its
 * socket.
 */
import type { ConnectionOptions, NatsConnection } from "@nats-io/transport-node"

/** The longest greeting (first line) a NATS server may send. */
const MAX_GREETING_BYTES = 64 * 1024

/** `connect` of `@nats-io/transport-node`, on the bounded transport. */
export const connectBounded = async (options: ConnectionOptions): Promise<NatsConnection> => {
  const [{ NodeTransport, nodeResolveHost }, { NatsConnectionImpl, setTransportFactory }] = await Promise.all([
    import("@nats-io/transport-node/lib/node_transport.js"),
    import("@nats-io/transport-node/lib/nats-base-client.js")
  ])

  class BoundedTransport extends NodeTransport {
    override peekInfo() {
      const socket = this.socket
      let size = 0
      // Before the client's own listener: it joins the chunks, so it must never see many.
      socket.on("data", (chunk: Uint8Array) => {
        size += chunk.length
        if (size > MAX_GREETING_BYTES) {
          socket.destroy(new Error(`the server's greeting is longer than ${MAX_GREETING_BYTES} bytes`))
        }
      })
      return super.peekInfo()
    }

    override close(error?: Error) {
      if (!this.connected) this.socket?.destroy()
      return super.close(error)
    }
  }

  setTransportFactory({ factory: () => new BoundedTransport(), dnsResolveFn: nodeResolveHost })
  return NatsConnectionImpl.connect(options)
}
