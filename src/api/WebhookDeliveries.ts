/**
 * What webhook deliveries are about and how their log is searched: the
 * event types, the action-class filter, a delivery record, and the query
 * of `GET /v1/notification-endpoints/:id/deliveries` and `GET
 * /v1/deliveries` (docs/webhooks.md, "Searching the delivery log").
 */
import { Schema, SchemaTransformation } from "effect"
import { type ApprovalEventType, ApprovalEventTypes } from "./Approvals.ts"
import { answeredAs, Cursor, Instant, Limit, NextCursor, Text, Timestamp, Uuid } from "./Common.ts"

/**
 * Operational events about the organization's endpoints: one stopped being
 * sent to (`endpoint.disabled`), started failing (`endpoint.failing`) or
 * has a client certificate near its expiry (`endpoint.certificate_expiring`).
 * Never part of the default subscription, never sent to the endpoint they
 * are about.
 */
export const EndpointEventTypes = ["endpoint.disabled", "endpoint.failing", "endpoint.certificate_expiring"] as const
export type EndpointEventType = typeof EndpointEventTypes[number]

/** Every event type an endpoint may subscribe to. */
export const EventTypes = [...ApprovalEventTypes, ...EndpointEventTypes] as const

/** An event type: the enum on the wire, a string once decoded; any other is `400 INVALID_WEBHOOK_EVENTS`. */
export const EventTypeName = Schema.Literals(EventTypes).annotate(answeredAs("INVALID_WEBHOOK_EVENTS"))
  .pipe(Schema.decodeTo(Text, SchemaTransformation.passthroughSubtype()))
export type EventType = ApprovalEventType | EndpointEventType

/** One entry of an `action_classes` filter: an action class, or a prefix ending in `.*`. */
export const ActionClassFilter = Text.check(
  Schema.isPattern(/^[A-Za-z0-9](?:[A-Za-z0-9._:-]{0,127}|[A-Za-z0-9._:-]{0,125}\.\*)$/u, {
    message: "Expected an action class (1 to 128 letters, digits, '.', '_', ':' or '-') or a prefix ending in '.*'"
  })
)

const DeliveryStatus = Schema.Literals(["queued", "sending", "retrying", "delivered", "failed"])

export const NotificationDelivery = Schema.Struct({
  id: Uuid,
  endpoint_id: Uuid.annotate({ description: "The notification endpoint it is sent to" }),
  event_id: Uuid,
  label: Schema.NullOr(Schema.String),
  status: DeliveryStatus,
  status_code: Schema.NullOr(Schema.Int).annotate({
    description: "HTTP status of the last attempt; null before the first, after a network error, or for a broker"
  }),
  attempts: Schema.Int,
  replays: Schema.Int,
  last_error: Schema.NullOr(Schema.String),
  created_at: Timestamp,
  finished_at: Schema.NullOr(Timestamp)
})
export type NotificationDelivery = typeof NotificationDelivery.Type

/** `5xx` (a class) or `503` (one code). */
const StatusCodeQuery = Text.check(
  Schema.isPattern(/^(?:[2-5]xx|[1-5][0-9]{2})$/u, {
    message: "Expected an HTTP status class (2xx, 3xx, 4xx, 5xx) or a status code from 100 to 599"
  })
)

const instant = (description: string) => Schema.optionalKey(Instant.annotate({ description }))

/** The filters of a delivery search; every one given must hold (AND). */
export const DeliverySearch = {
  status: Schema.optionalKey(DeliveryStatus.annotate({ description: "Only deliveries with this status" })),
  status_code: Schema.optionalKey(StatusCodeQuery.annotate({
    description:
      "Only deliveries whose last attempt got this HTTP status: a class (`2xx`, `3xx`, `4xx`, `5xx`) or a code (`503`)"
  })),
  event_type: Schema.optionalKey(
    Schema.Literals(EventTypes).annotate({
      description: "Only deliveries of this event type (test deliveries of that type included)"
    })
  ),
  event_id: Schema.optionalKey(Uuid.annotate({ description: "Only deliveries of this event" })),
  approval_id: Schema.optionalKey(Uuid.annotate({ description: "Only deliveries of this approval's events" })),
  action_class: Schema.optionalKey(ActionClassFilter.annotate({
    description:
      "Only deliveries of approval events whose step has this action class: exact, or a prefix ending in `.*` (`payments.*`)"
  })),
  label: Schema.optionalKey(
    Text.check(Schema.isMinLength(1), Schema.isMaxLength(300)).annotate({
      description:
        "Only deliveries with this label (1 to 300 characters); ending in `*`: labels starting with what precedes it (`test*`)"
    })
  ),
  created_from: instant("Only deliveries created at or after this instant (RFC 3339)"),
  created_until: instant("Only deliveries created before this instant"),
  finished_from: instant("Only deliveries finished at or after this instant"),
  finished_until: instant("Only deliveries finished before this instant"),
  limit: Limit,
  cursor: Cursor
}

export const DeliveryPage = Schema.Struct({
  deliveries: Schema.Array(NotificationDelivery),
  next_cursor: NextCursor.annotate({
    description: "Pass as `cursor`, with the same filters, for the next (older) page; null on the last page"
  })
})
