/**
 * RabbitMQ (AMQP 0-9-1) publishing with `amqplib`: one connection with one
 * confirm channel per destination (cached by `Brokers.ts`).
 *
 * A publish is delivered only when the broker confirms it (publisher
 * confirms: `basic.ack`). It fails when the broker nacks it, returns it as
 * unroutable (published `mandatory`: a `basic.return` precedes the ack),
 * or closes the channel (e.g. `404 NOT_FOUND`: the exchange does not
 * exist); a closed channel is opened again for the next publish, a closed
 * connection is dropped from the cache.
 *
 * Message: the event's stored body bytes, persistent (delivery mode 2),
 * `content-type: application/json`, `message-id` the event id, `type` the
 * event type, and the delivery's signature headers (`Signing.ts`) as AMQP
 * headers, with the names and values an `https` receiver gets.
 */
import type { ConfirmChannel } from "amqplib"
import type { BrokerConnection, BrokerMessage, BrokerTarget } from "./BrokerUrl.ts"

/** The largest AMQP frame svc sends or reads: a larger one from the server fails the connection. */
const MAX_FRAME_BYTES = 131_072

/** The broker's reason for closing a channel or connection, without the stack. */
const reasonOf = (error: unknown): string => error instanceof Error ? error.message : String(error)

/**
 * Opens the connection to `address` (checked by the caller), with the URL's
 * host as the TLS server name, and a confirm channel on it.
 */
export const openAmqp = async (
  target: BrokerTarget,
  address: string,
  ca: ReadonlyArray<string>,
  timeoutMs: number
): Promise<BrokerConnection> => {
  // Loaded on first use: a service without RabbitMQ destinations never pays for it.
  const { connect } = await import("amqplib")
  const connection = await connect({
    protocol: target.tls ? "amqps" : "amqp",
    hostname: address,
    port: target.port,
    // As amqplib reads a URL: no credentials at all means RabbitMQ's default user.
    username: target.username === "" && target.password === "" ? "guest" : target.username,
    password: target.username === "" && target.password === "" ? "guest" : target.password,
    vhost: target.vhost,
    heartbeat: 30,
    // Frames of at most 128 KiB (RabbitMQ's default) each way. amqplib joins
    // the chunks of an incoming frame at every chunk, and takes frames of up
    // to 64 MiB by default: a server that announced one and sent it held the
    // event loop for as long as it kept sending, after the attempt had failed.
    frameMax: MAX_FRAME_BYTES,
    maxFrameSize: MAX_FRAME_BYTES
  }, {
    timeout: timeoutMs,
    ...(target.tls ? { servername: target.url.hostname, ca: [...ca] } : {})
  })
  let closed = false
  let connectionError: string | undefined
  connection.on("error", (error) => {
    connectionError = reasonOf(error)
  })
  connection.on("close", () => {
    closed = true
  })
  /** Message ids the broker returned as unroutable since their publish. */
  const returned = new Set<string>()
  /** The channel in use (a new one after the broker closed it), and why the broker closed it. */
  let channel: Promise<{ readonly confirm: ConfirmChannel; error: string | undefined }> | undefined
  const openChannel = () => {
    const opening = connection.createConfirmChannel().then((confirm) => {
      const state = { confirm, error: undefined as string | undefined }
      confirm.on("error", (error) => {
        state.error = reasonOf(error)
      })
      confirm.on("close", () => {
        if (channel === opening) channel = undefined
      })
      confirm.on("return", (message) => {
        const id = message.properties.messageId
        if (typeof id === "string") returned.add(id)
      })
      return state
    })
    opening.catch(() => {
      if (channel === opening) channel = undefined
    })
    return opening
  }
  return {
    get closed() {
      return closed
    },
    close: () => {
      closed = true
      connection.close().catch(() => undefined)
    },
    publish: async (message: BrokerMessage) => {
      channel ??= openChannel()
      const state = await channel
      returned.delete(message.eventId)
      const routingKey = target.routingKey ?? message.type
      try {
        await new Promise<void>((resolve, reject) => {
          state.confirm.publish(target.exchange, routingKey, message.body, {
            persistent: true,
            mandatory: true,
            contentType: "application/json",
            messageId: message.eventId,
            type: message.type,
            headers: message.headers
          }, (error) => error === null || error === undefined ? resolve() : reject(error))
        })
      } catch (error) {
        // The broker's reason (its channel close) may be reported just after the nack.
        await new Promise((resolve) => setImmediate(resolve))
        throw new Error(`RabbitMQ did not confirm the publish: ${state.error ?? connectionError ?? reasonOf(error)}`, {
          cause: error
        })
      }
      if (returned.delete(message.eventId)) {
        throw new Error(
          `RabbitMQ returned the message as unroutable: no queue is bound to exchange ${target.exchange} for routing key ${routingKey}`
        )
      }
      return "confirmed by RabbitMQ"
    }
  }
}
