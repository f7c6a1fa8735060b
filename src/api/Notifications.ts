/**
 * Notification endpoints (webhooks) for approval events, their delivery
 * records and replay, secret rotation and the reviewer email address
 * (spec "Notification endpoints"; DESIGN.md "Notification endpoint fields").
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { type ApprovalEventType, ApprovalEventTypes } from "./Approvals.ts"
import { Timestamp, Uuid } from "./Common.ts"
import { InvalidUrl, NotReplayable, QueueFull, Replayed } from "./Deliveries.ts"
import { LimitReached, NotFound, problemType } from "./Errors.ts"
import { HttpApiError } from "effect/http-api"
import { Authentication, requireScope } from "./Security.ts"
import { documented, notFound } from "./Documentation.ts"
import * as Examples from "./Examples.ts"

/** The six approval event types (spec "Events"), in lifecycle order: the approvals contract's list. */
export const EventTypes = ApprovalEventTypes
export type EventType = ApprovalEventType

/** Event types that are also mailed to the reviewer address (spec, delivery rule 6). */
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

/**
 * Event names (and how many) are checked by the service, not the schema, so
 * that an empty, unknown or oversized selection is the spec's
 * `INVALID_WEBHOOK_EVENTS`, not a generic decode error (the request body
 * limit bounds the input).
 */
const EventSelection = Schema.Array(Schema.String)
  .annotate({ description: `Event types to subscribe to: ${EventTypes.join(", ")}` })

export const NotificationEndpoint = Schema.Struct({
  id: Uuid,
  url_hint: Schema.String.annotate({ description: "Masked receiver address; the full URL is never returned" }),
  events: Schema.Array(Schema.String),
  active: Schema.Boolean,
  created_at: Timestamp,
  created_by: Schema.String.annotate({ description: "Id of the API key that created the endpoint" }),
  deactivated_at: Schema.optionalKey(Timestamp),
  deactivated_reason: Schema.optionalKey(Schema.String.annotate({
    description: "Why the endpoint is inactive (e.g. the receiver answered 410 Gone). PATCH reactivates it."
  })),
  cooldown_until: Schema.optionalKey(Timestamp.annotate({
    description:
      "Present while the endpoint is cooling down after consecutive failed attempts: no delivery (replays included) is attempted before then"
  }))
})
export type NotificationEndpoint = typeof NotificationEndpoint.Type

export const NotificationDelivery = Schema.Struct({
  id: Uuid,
  event_id: Uuid,
  label: Schema.NullOr(Schema.String),
  status: Schema.Literals(["queued", "sending", "retrying", "delivered", "failed"]),
  attempts: Schema.Int,
  replays: Schema.Int,
  last_error: Schema.NullOr(Schema.String),
  created_at: Timestamp,
  finished_at: Schema.NullOr(Timestamp)
})
export type NotificationDelivery = typeof NotificationDelivery.Type

export const CreateEndpoint = Schema.Struct({
  url: Schema.String.check(Schema.isMaxLength(2048)).annotate({ description: "Public HTTPS receiver URL" }),
  events: Schema.optionalKey(EventSelection)
})

export const UpdateEndpoint = Schema.Struct({
  events: EventSelection
})

export const RotateSecret = Schema.Struct({
  overlap_seconds: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 7 * 24 * 3600 })).annotate({
      description: "How long the previous secret keeps signing beside the new one (0 to 604800, default 86400)"
    })
  )
})

export const NotificationSettings = Schema.Struct({
  reviewer_email: Schema.NullOr(Schema.String),
  email_notifier: Schema.Boolean
})

export const UpdateNotificationSettings = Schema.Struct({
  reviewer_email: Schema.NullOr(
    Schema.String.check(
      Schema.isMaxLength(254),
      Schema.isPattern(/^[^\s@<>",;:()\\[\]]+@[^\s@<>",;:()\\[\]]+\.[^\s@<>",;:()\\[\]]+$/, {
        message: "Expected an email address"
      })
    )
  )
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
      error: [InvalidUrl, InvalidWebhookEvents, LimitReached]
    }).pipe(
      requireScope(
        "org_config.write",
        "Creates an endpoint. The signing `secret` is shown only in this answer. Omitted `events`: all six types."
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
      error: [NotFound, InvalidWebhookEvents]
    }).pipe(
      requireScope(
        "org_config.write",
        "Replaces the event selection (address and secret unchanged) and reactivates an endpoint a 410 deactivated."
      ),
      documented({
        summary: "Change an endpoint's events",
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
      error: NotFound
    }).pipe(
      requireScope(
        "org_config.write",
        "Issues a new signing secret (shown only in this answer). Until `previous_secret_expires_at` deliveries carry one `v1=` signature per secret."
      ),
      documented({
        summary: "Rotate an endpoint's signing secret",
        request: Examples.rotateSecret,
        response: Examples.rotatedSecret,
        errors: { 404: notFound("endpoint") }
      })
    ),
    HttpApiEndpoint.get("deliveries", "/v1/notification-endpoints/:id/deliveries", {
      params: EndpointId,
      success: Schema.Struct({ deliveries: Schema.Array(NotificationDelivery) }),
      error: NotFound
    }).pipe(
      requireScope("org_config.read", "The latest 50 delivery records, newest first, without payloads."),
      documented({
        summary: "List an endpoint's deliveries",
        response: Examples.notificationDeliveries,
        errors: { 404: notFound("endpoint") }
      })
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
    HttpApiEndpoint.get("getSettings", "/v1/notification-settings", {
      success: NotificationSettings
    }).pipe(
      requireScope("org_config.read", "The reviewer email address and whether reviewer email is active."),
      documented({ summary: "Get the notification settings", response: Examples.notificationSettings })
    ),
    HttpApiEndpoint.put("updateSettings", "/v1/notification-settings", {
      payload: UpdateNotificationSettings,
      success: NotificationSettings
    }).pipe(
      requireScope(
        "org_config.write",
        "Sets (or, with null, clears) the reviewer email address that receives approval requests and deadline notices."
      ),
      documented({
        summary: "Set the reviewer email address",
        request: Examples.updateNotificationSettings,
        response: Examples.notificationSettings
      })
    )
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "Notification endpoints")
{}
