/**
 * A notification endpoint's settings: the events it subscribes to, its
 * action-class filter, ordering, custom headers, rate limit, and how svc
 * authenticates to it; the endpoint as answered, created and changed
 * (docs/webhooks.md, "Endpoints"). The routes are in `Notifications.ts`.
 */
import { Schema } from "effect"
import { answeredAs, Timestamp, UrlOf, Uuid } from "./Common.ts"
import { ClientCertificateInput, ClientCertificateView, EndpointAuthInput, EndpointAuthView } from "./EndpointAuth.ts"
import { CustomHeaders, TRANSPORT_HEADERS, WEBHOOK_OWN_HEADERS } from "./HeaderNames.ts"
import { ActionClassFilter, EventTypeName, EventTypes } from "./WebhookDeliveries.ts"

/** An event selection: 1 to 20 event types (duplicates collapse), else `400 INVALID_WEBHOOK_EVENTS`. */
const EventSelection = Schema.Array(EventTypeName).check(
  Schema.isMinLength(1, {
    message: "events must name at least one event type",
    ...answeredAs("INVALID_WEBHOOK_EVENTS")
  }),
  Schema.isMaxLength(20, { message: "events may list at most 20 entries", ...answeredAs("INVALID_WEBHOOK_EVENTS") })
).annotate({ description: `Event types to subscribe to (1 to 20 entries): ${EventTypes.join(", ")}` })

/** Most entries an `action_classes` filter may have. */
const MAX_ACTION_CLASS_FILTERS = 50

/** The approval events an endpoint gets, by their step's action class; null: all. */
const ActionClassFilters = Schema.NullOr(
  Schema.Array(ActionClassFilter).check(Schema.isMaxLength(MAX_ACTION_CLASS_FILTERS, {
    message: `Expected at most ${MAX_ACTION_CLASS_FILTERS} entries`
  }))
).annotate({
  description:
    `Only approval events whose step's action class is listed (exactly, or under a prefix ending in \`.*\`, e.g. \`payments.*\`) are delivered; null or absent: all. At most ${MAX_ACTION_CLASS_FILTERS} entries. Operational events (\`endpoint.*\`) are not filtered.`
})

/**
 * How an endpoint's deliveries go out: `concurrent` (several at once, in no
 * promised order) or `strict` (one at a time, in the order the events were
 * recorded; one that keeps failing holds the ones behind it until it is
 * delivered or fails for good).
 */
export const EndpointOrdering = Schema.Literals(["concurrent", "strict"]).annotate({
  description:
    "`concurrent` (default): several deliveries in flight at once, in no promised order. `strict`: one at a time, in the order the events were recorded; a delivery that keeps failing holds the ones behind it until it is delivered or fails for good."
})
export type EndpointOrdering = typeof EndpointOrdering.Type

/** Most deliveries per second an endpoint's `rate_limit` may say. */
export const MAX_RATE_LIMIT = 1000

/** Custom headers: every rule but two names differing only in case and a value's UTF-8 length is the schema's (`HeaderNames.ts`). */
const EndpointHeaders = CustomHeaders(
  [TRANSPORT_HEADERS, WEBHOOK_OWN_HEADERS],
  "Headers sent with every delivery, retry, replay and test event to this endpoint (e.g. a routing key or a static token), at most 10. Values are encrypted at rest and never returned; only the names are listed. Transport, hop-by-hop, trace-context and cookie headers and svc's own (`Content-Type`, `User-Agent`, `Accept-Encoding`, `X-Svc-*`, `webhook-*`) are refused (`INVALID_HEADERS`), as are two names differing only in case and a value over 4096 UTF-8 bytes."
)

/** Deliveries per second; null: unlimited. */
const RateLimit = Schema.NullOr(
  Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MAX_RATE_LIMIT }))
).annotate({
  description:
    `At most this many deliveries per second to the endpoint (1 to ${MAX_RATE_LIMIT}), counted across every svc process, retries and replays included, with a burst of one second's worth; null or absent: unlimited. Test events are not counted.`
})

export const NotificationEndpoint = Schema.Struct({
  id: Uuid,
  url_hint: Schema.String.annotate({ description: "Masked receiver address; the full URL is never returned" }),
  events: Schema.Array(Schema.String),
  ordering: EndpointOrdering,
  active: Schema.Boolean,
  created_at: Timestamp,
  created_by: Schema.String.annotate({ description: "Id of the API key that created the endpoint" }),
  deactivated_at: Schema.optionalKey(Timestamp),
  deactivated_reason: Schema.optionalKey(Schema.String.annotate({
    description:
      "Why the endpoint is inactive (the receiver answered 410 Gone, or it failed for SVC_WEBHOOK_DISABLE_AFTER without a success). PATCH reactivates it."
  })),
  cooldown_until: Schema.optionalKey(Timestamp.annotate({
    description:
      "Present while the endpoint is cooling down after consecutive failed attempts: no delivery (replays included) is attempted before then"
  })),
  failing_since: Schema.optionalKey(Timestamp.annotate({
    description:
      "Present while the endpoint is failing: since it entered a cooldown after having been healthy (when `endpoint.failing` was sent); cleared by its next successful delivery"
  })),
  action_classes: Schema.NullOr(Schema.Array(Schema.String)).annotate({
    description: "Action classes (exact, or prefixes ending in `.*`) whose approval events the endpoint gets; null: all"
  }),
  headers: Schema.Array(Schema.String).annotate({
    description: "Names of the endpoint's custom headers, as given; their values are never returned"
  }),
  rate_limit: Schema.NullOr(Schema.Int).annotate({ description: "Deliveries per second at most; null: unlimited" }),
  auth: EndpointAuthView,
  tls_client_certificate: ClientCertificateView
})
export type NotificationEndpoint = typeof NotificationEndpoint.Type

export const CreateEndpoint = Schema.Struct({
  url: UrlOf(["https", "amqp", "amqps", "nats", "tls"], "Expected an https, amqp, amqps, nats or tls URL").annotate({
    description:
      "Public HTTPS receiver URL, or a broker destination: `amqp://` / `amqps://` (RabbitMQ: `?exchange=` required, `&routing_key=` default the event type, path the virtual host) or `nats://` / `tls://` (NATS JetStream: `?subject=` required). Broker URLs may carry credentials; the URL is a secret, never returned."
  }),
  events: Schema.optionalKey(EventSelection),
  action_classes: Schema.optionalKey(ActionClassFilters),
  ordering: Schema.optionalKey(EndpointOrdering),
  headers: Schema.optionalKey(EndpointHeaders),
  rate_limit: Schema.optionalKey(RateLimit),
  auth: Schema.optionalKey(EndpointAuthInput),
  tls_client_certificate: Schema.optionalKey(ClientCertificateInput)
})

export const UpdateEndpoint = Schema.Struct({
  events: Schema.optionalKey(
    EventSelection.annotate({ description: "Replaces the event selection; absent: unchanged" })
  ),
  action_classes: Schema.optionalKey(ActionClassFilters),
  ordering: Schema.optionalKey(EndpointOrdering),
  headers: Schema.optionalKey(EndpointHeaders.annotate({
    description:
      "Replaces the whole set of custom headers (values write-only: give every header again); `{}` removes them all; absent: unchanged. Same rules as on create."
  })),
  rate_limit: Schema.optionalKey(
    RateLimit.annotate({ description: "Replaces the rate limit; null: unlimited; absent: unchanged" })
  ),
  auth: Schema.optionalKey(EndpointAuthInput),
  tls_client_certificate: Schema.optionalKey(ClientCertificateInput)
})
