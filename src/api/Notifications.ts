/**
 * Notification endpoints (webhooks) for approval events, their delivery
 * records and replay, secret rotation and the reviewer email address
 * (docs/webhooks.md, "Endpoints" and "Delivery").
 */
import { Schema, SchemaTransformation } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { type ApprovalEventType, ApprovalEventTypes } from "./Approvals.ts"
import { ActionClassFilter, DeliveryPage, DeliverySearch, type EventType, EventTypes } from "./WebhookDeliveries.ts"
import { answeredAs, EmailAddress, Instant, Text, Timestamp, UrlOf, Uuid } from "./Common.ts"
import { CustomHeaders, TRANSPORT_HEADERS, WEBHOOK_OWN_HEADERS } from "./HeaderNames.ts"
import { InvalidUrl, NotReplayable, QueueFull, Replayed } from "./Deliveries.ts"
import { InvalidHeaders, InvalidRequest, LimitReached, NotFound, problemType, RateLimited } from "./Errors.ts"
import { HttpApiError } from "effect/http-api"
import { Authentication, requireScope } from "./Security.ts"
import { documented, notFound } from "./Documentation.ts"
import { ClientCertificateInput, ClientCertificateView, EndpointAuthInput, EndpointAuthView } from "./EndpointAuth.ts"
import * as Examples from "./Examples.ts"

export {
  ActionClassFilter,
  type EndpointEventType,
  EndpointEventTypes,
  type EventType,
  EventTypes,
  NotificationDelivery
} from "./WebhookDeliveries.ts"

/** The six approval event types (spec "Events"), in lifecycle order: the default subscription. */
export const DefaultEventTypes: ReadonlyArray<ApprovalEventType> = ApprovalEventTypes

/** Event types that are also mailed to the reviewer address (approved and rejected are for webhook receivers only). */
export const EmailedEventTypes: ReadonlyArray<EventType> = ["approval.requested", "approval.expiring", "approval.escalated"]

export class InvalidWebhookEvents extends HttpApiError.Problem<InvalidWebhookEvents>()("InvalidWebhookEvents", {
  type: problemType("INVALID_WEBHOOK_EVENTS"),
  status: 400,
  title: "The events list is empty or names an unknown event type"
}, {
  code: Schema.tag("INVALID_WEBHOOK_EVENTS"),
  field: Schema.optionalKey(Schema.String),
  supported: Schema.optionalKey(Schema.Array(Schema.String))
}) {}

/** An event type: the enum on the wire, a string once decoded; any other is `400 INVALID_WEBHOOK_EVENTS`. */
export const EventTypeName = Schema.Literals(EventTypes).annotate(answeredAs("INVALID_WEBHOOK_EVENTS"))
  .pipe(Schema.decodeTo(Text, SchemaTransformation.passthroughSubtype()))

/** An event selection: 1 to 20 event types (duplicates collapse), else `400 INVALID_WEBHOOK_EVENTS`. */
const EventSelection = Schema.Array(EventTypeName).check(
  Schema.isMinLength(1, { message: "events must name at least one event type", ...answeredAs("INVALID_WEBHOOK_EVENTS") }),
  Schema.isMaxLength(20, { message: "events may list at most 20 entries", ...answeredAs("INVALID_WEBHOOK_EVENTS") })
).annotate({ description: `Event types to subscribe to (1 to 20 entries): ${EventTypes.join(", ")}` })

/** Most entries an `action_classes` filter may have. */
export const MAX_ACTION_CLASS_FILTERS = 50

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
    description: "Why the endpoint is inactive (the receiver answered 410 Gone, or it failed for SVC_WEBHOOK_DISABLE_AFTER without a success). PATCH reactivates it."
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
  events: Schema.optionalKey(EventSelection.annotate({ description: "Replaces the event selection; absent: unchanged" })),
  action_classes: Schema.optionalKey(ActionClassFilters),
  ordering: Schema.optionalKey(EndpointOrdering),
  headers: Schema.optionalKey(EndpointHeaders.annotate({
    description: "Replaces the whole set of custom headers (values write-only: give every header again); `{}` removes them all; absent: unchanged. Same rules as on create."
  })),
  rate_limit: Schema.optionalKey(RateLimit.annotate({ description: "Replaces the rate limit; null: unlimited; absent: unchanged" })),
  auth: Schema.optionalKey(EndpointAuthInput),
  tls_client_certificate: Schema.optionalKey(ClientCertificateInput)
})

export const TestDelivery = Schema.Struct({
  event_type: Schema.optionalKey(EventTypeName.annotate({
    description: "One of the endpoint's event types; default: its first"
  }))
})

export const TestDelivered = Schema.Struct({
  delivered: Schema.Literal(true),
  status: Schema.optionalKey(Schema.Int.annotate({
    description: "The receiver's HTTP status (2xx); absent for a broker destination, which acknowledged the message"
  })),
  duration_ms: Schema.Int
})

/** A test delivery the receiver did not accept: its status or the network error, never its body. */
export class DeliveryFailed extends HttpApiError.Problem<DeliveryFailed>()("DeliveryFailed", {
  type: problemType("DELIVERY_FAILED"),
  status: 502,
  title: "The receiver did not accept the test delivery"
}, {
  code: Schema.tag("DELIVERY_FAILED"),
  receiver_status: Schema.optionalKey(Schema.Int.annotate({ description: "The receiver's HTTP status, when it answered" })),
  error: Schema.String.annotate({ description: "What went wrong: the status, or the network or TLS error" }),
  duration_ms: Schema.Int
}) {}

export const BulkReplay = Schema.Struct({
  since: Instant.annotate({ description: "Failed deliveries created at or after this instant" }),
  until: Schema.optionalKey(Instant.annotate({ description: "… and before this one (default: now)" })),
  dry_run: Schema.optionalKey(Schema.Boolean.annotate({ description: "Count only; queue nothing" }))
})

export const BulkReplayed = Schema.Struct({
  matched: Schema.Int.annotate({ description: "Failed deliveries of the endpoint created in [since, until)" }),
  queued: Schema.Int.annotate({ description: "Queued again (0 on a dry run)" }),
  not_queued: Schema.Int.annotate({
    description: "Matched but not queued: over the queue's capacity (`SVC_WEBHOOK_QUEUE_CAPACITY`) or over the most one call takes (`SVC_WEBHOOK_REPLAY_MAX`); on a dry run, those that would not fit"
  }),
  next_since: Schema.optionalKey(Timestamp.annotate({
    description: "Present when the window matched more than one call takes: call again with this `since` for the rest"
  }))
})

export const EndpointStats = Schema.Struct({
  since: Timestamp.annotate({ description: "Start of the window (24 hours before now)" }),
  delivered: Schema.Int,
  failed: Schema.Int,
  pending: Schema.Int.annotate({ description: "Queued, sending or retrying" }),
  success_rate: Schema.NullOr(Schema.Number).annotate({
    description: "delivered / (delivered + failed), 0 to 1; null when none finished"
  }),
  duration_ms_p50: Schema.NullOr(Schema.Number).annotate({ description: "Median duration of the window's attempts; null without attempts" }),
  duration_ms_p95: Schema.NullOr(Schema.Number)
})

export const RotateSecret = Schema.Struct({
  overlap_seconds: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 7 * 24 * 3600 })).annotate({
      description: "How long the secret signing until now keeps signing beside the new one (0 to 604800, default 86400)"
    })
  ),
  expire_previous: Schema.optionalKey(
    Schema.Literals(["latest", "all"]).annotate({
      description: "Which earlier secrets the overlap ends. `latest` (default): only the one signing until now; " +
        "older ones still in the overlap of an earlier rotation keep the end that rotation announced, and a rotation " +
        "after which more than `SVC_WEBHOOK_MAX_SIGNING_SECRETS` secrets would sign is refused (409 `LIMIT_REACHED`; " +
        "with `overlap_seconds: 0` the one signing until now ends at once, so it is taken at the cap). " +
        "`all`: every earlier secret ends within the overlap (none is lengthened), and the oldest beyond " +
        "`SVC_WEBHOOK_MAX_SIGNING_SECRETS` end at once; with `overlap_seconds: 0` every earlier secret ends now " +
        "(a leaked secret), whatever signs."
    })
  )
})

export const NotificationSettings = Schema.Struct({
  reviewer_email: Schema.NullOr(Schema.String).annotate({
    description: "The reviewer address that receives approval requests and deadline notices; null: none"
  }),
  reviewer_email_status: Schema.NullOr(Schema.Literals(["pending", "confirmed"])).annotate({
    description:
      "`pending`: a confirmation mail went to the address and it receives no approval mail until its link is opened and confirmed; `confirmed`: it receives them. Null without an address."
  }),
  email_notifier: Schema.Boolean.annotate({
    description: "Whether reviewer email is active: `SVC_SMTP_URL` is set and the reviewer address is confirmed"
  })
})

export const UpdateNotificationSettings = Schema.Struct({
  reviewer_email: Schema.NullOr(EmailAddress)
})

const EndpointId = { id: Uuid }

export class NotificationsApi extends HttpApiGroup.make("notifications")
  .add(
    HttpApiEndpoint.get("list", "/v1/notification-endpoints", {
      success: Schema.Struct({ endpoints: Schema.Array(NotificationEndpoint), email_notifier: Schema.Boolean })
    }).pipe(
      requireScope(
        "org_config.read",
        "Lists the organization's notification endpoints. `email_notifier` is true when reviewer email is configured."
      ),
      documented({ summary: "List notification endpoints", response: Examples.endpointList })
    ),
    HttpApiEndpoint.post("create", "/v1/notification-endpoints", {
      payload: CreateEndpoint,
      success: Schema.Struct({ endpoint: NotificationEndpoint, secret: Schema.String }).pipe(HttpApiSchema.status(201)),
      error: [InvalidUrl, InvalidWebhookEvents, InvalidHeaders, InvalidRequest, LimitReached]
    }).pipe(
      requireScope(
        "org_config.write",
        "Creates an endpoint. The signing `secret` (`whsec_` + base64) is shown only in this answer. Omitted `events`: the six approval event types (operational `endpoint.*` events only when listed); omitted `ordering`: `concurrent`."
      ),
      documented({
        summary: "Create a notification endpoint",
        request: Examples.createEndpoint,
        response: Examples.createdEndpoint,
        errors: { 409: "The organization already has `SVC_MAX_ENDPOINTS_PER_ORG` endpoints (default 50; `LIMIT_REACHED`)." }
      })
    ),
    HttpApiEndpoint.patch("update", "/v1/notification-endpoints/:id", {
      params: EndpointId,
      payload: UpdateEndpoint,
      success: NotificationEndpoint,
      error: [NotFound, InvalidUrl, InvalidWebhookEvents, InvalidHeaders, InvalidRequest]
    }).pipe(
      requireScope(
        "org_config.write",
        "Replaces the event selection, the `action_classes` filter, the ordering, the custom headers and/or the rate limit (each unchanged when absent; `action_classes: null` clears the filter, `headers: {}` removes the custom headers, `rate_limit: null` lifts the limit; address and secret unchanged) and reactivates an inactive endpoint. A new `ordering` or `rate_limit` applies to the deliveries still waiting too."
      ),
      documented({
        summary: "Change an endpoint",
        request: Examples.updateEndpoint,
        response: Examples.updatedEndpoint
      })
    ),
    HttpApiEndpoint.delete("remove", "/v1/notification-endpoints/:id", {
      params: EndpointId,
      success: HttpApiSchema.NoContent,
      error: NotFound
    }).pipe(
      requireScope(
        "org_config.write",
        "Removes the endpoint; its pending deliveries end as failed. A request already in flight may still arrive."
      ),
      documented({
        summary: "Delete a notification endpoint",
        errors: { 404: notFound("endpoint") }
      })
    ),
    HttpApiEndpoint.post("rotateSecret", "/v1/notification-endpoints/:id/rotate-secret", {
      params: EndpointId,
      payload: RotateSecret,
      success: Schema.Struct({
        endpoint: NotificationEndpoint,
        secret: Schema.String,
        previous_secret_expires_at: Timestamp
      }),
      error: [NotFound, LimitReached]
    }).pipe(
      requireScope(
        "org_config.write",
        "Issues a new signing secret (shown only in this answer). Until `previous_secret_expires_at` deliveries carry one `v1=` signature per secret."
      ),
      documented({
        summary: "Rotate an endpoint's signing secret",
        request: Examples.rotateSecret,
        response: Examples.rotatedSecret,
        errors: { 404: notFound("endpoint"), 409: "With `expire_previous: \"latest\"`, the new secret would make more than `SVC_WEBHOOK_MAX_SIGNING_SECRETS` secrets " +
            "(default 3) sign at once: wait until the oldest ends (the detail says when), rotate with `overlap_seconds: 0`, " +
            "or pass `expire_previous: \"all\"` (`LIMIT_REACHED`)." }
      })
    ),
    HttpApiEndpoint.get("deliveries", "/v1/notification-endpoints/:id/deliveries", {
      params: EndpointId,
      query: DeliverySearch,
      success: DeliveryPage,
      error: [NotFound, InvalidRequest]
    }).pipe(
      requireScope(
        "org_config.read",
        "The endpoint's delivery records, newest first, without payloads: the latest 50 without filters; `limit` up to 100, the filters below (all must hold) and `cursor` for older pages."
      ),
      documented({
        summary: "List and search an endpoint's deliveries",
        response: Examples.notificationDeliveries,
        errors: { 404: notFound("endpoint") }
      })
    ),
    HttpApiEndpoint.get("allDeliveries", "/v1/deliveries", {
      query: DeliverySearch,
      success: DeliveryPage,
      error: InvalidRequest
    }).pipe(
      requireScope(
        "org_config.read",
        "The organization's webhook delivery records to every endpoint (deleted ones included), newest first, with the same filters and pages as an endpoint's list."
      ),
      documented({ summary: "Search the organization's deliveries", response: Examples.notificationDeliveries })
    ),
    HttpApiEndpoint.post("replay", "/v1/notification-endpoints/:id/deliveries/:delivery/replay", {
      params: { id: Uuid, delivery: Uuid },
      success: Replayed,
      error: [NotFound, NotReplayable, QueueFull]
    }).pipe(
      requireScope(
        "org_config.write",
        "Requeues a failed delivery with the same event id; it waits for the endpoint's cooldown."
      ),
      documented({ summary: "Replay a webhook delivery", response: Examples.replayed })
    ),
    HttpApiEndpoint.post("test", "/v1/notification-endpoints/:id/test", {
      params: EndpointId,
      payload: TestDelivery,
      success: TestDelivered,
      error: [NotFound, InvalidWebhookEvents, DeliveryFailed, RateLimited]
    }).pipe(
      requireScope(
        "org_config.write",
        "Sends one signed test event now, through the same checks and 5 s deadline as every delivery, and answers what the receiver did. The body has `\"test\": true` and an example approval. It is listed among the endpoint's deliveries with a label starting with `test`, never retried and never counted towards the cooldown. At most `SVC_WEBHOOK_TESTS_PER_MINUTE` per endpoint; for a broker, also `429` when none of the organization's connections (`SVC_BROKER_CONNECTIONS_PER_ORG`) or the process's (`SVC_BROKER_CONNECTIONS`) frees within the deadline."
      ),
      documented({
        summary: "Send a test event",
        request: Examples.testDelivery,
        response: Examples.testDeliveredAnswer,
        errors: {
          404: notFound("endpoint"),
          400: "`event_type` is not one of the endpoint's events (`INVALID_WEBHOOK_EVENTS`).",
          502: "The receiver answered other than 2xx, or could not be reached within 5 s (`DELIVERY_FAILED`, with `receiver_status` or `error`; never the receiver's body).",
          429: "The endpoint was tested `SVC_WEBHOOK_TESTS_PER_MINUTE` times this minute (`RATE_LIMITED`, with `retry_after_seconds`)."
        }
      })
    ),
    HttpApiEndpoint.post("replayFailed", "/v1/notification-endpoints/:id/deliveries/replay", {
      params: EndpointId,
      payload: BulkReplay,
      success: BulkReplayed,
      error: [NotFound, NotReplayable]
    }).pipe(
      requireScope(
        "org_config.write",
        "Queues again the endpoint's failed deliveries created in [`since`, `until`), oldest first, each keeping its event id and counting a replay; they wait for the endpoint's cooldown. What does not fit the queue's capacity is counted in `not_queued`, never dropped silently. At most `SVC_WEBHOOK_REPLAY_MAX` (10 000) per call; `next_since` says where the rest begins. Test deliveries are never replayed."
      ),
      documented({
        summary: "Replay failed deliveries of a time window",
        request: Examples.bulkReplay,
        response: Examples.bulkReplayed,
        errors: {
          404: notFound("endpoint"),
          409: "The endpoint is inactive; PATCH it to reactivate first (`NOT_REPLAYABLE`)."
        }
      })
    ),
    HttpApiEndpoint.get("stats", "/v1/notification-endpoints/:id/stats", {
      params: EndpointId,
      success: EndpointStats,
      error: NotFound
    }).pipe(
      requireScope(
        "org_config.read",
        "Delivery health over the last 24 hours: deliveries created in the window by status, the success rate of the finished ones and the p50/p95 duration of their attempts. Test deliveries are not counted."
      ),
      documented({ summary: "An endpoint's delivery statistics", response: Examples.endpointStats, errors: { 404: notFound("endpoint") } })
    ),
    HttpApiEndpoint.get("getSettings", "/v1/notification-settings", {
      success: NotificationSettings
    }).pipe(
      requireScope("org_config.read", "The reviewer email address and whether reviewer email is active."),
      documented({ summary: "Get the notification settings", response: Examples.notificationSettings })
    ),
    HttpApiEndpoint.put("updateSettings", "/v1/notification-settings", {
      payload: UpdateNotificationSettings,
      success: NotificationSettings,
      error: RateLimited
    }).pipe(
      requireScope(
        "org_config.write",
        "Sets (or, with null, clears) the reviewer email address that receives approval requests and deadline notices. A new address is `pending`: it is sent a confirmation mail whose one-time link (valid for `SVC_REVIEWER_CONFIRMATION_TTL`) confirms it, and it receives no approval mail before. Setting the address it already has changes nothing, except that a pending one is sent a new confirmation mail. Replacing or clearing the address ends every link mailed to the previous one."
      ),
      documented({
        summary: "Set the reviewer email address",
        errors: {
          429: "Confirmation mails of the organization over `SVC_REVIEWER_CONFIRMATIONS_PER_HOUR` (`RATE_LIMITED`, with `retry_after_seconds`); the address is not changed."
        },
        request: Examples.updateNotificationSettings,
        response: Examples.notificationSettings
      })
    )
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "Notification endpoints")
{}
