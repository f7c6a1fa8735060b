/**
 * Notification endpoints (webhooks) for approval events, their delivery
 * records and replay, secret rotation and the reviewer email address
 * (docs/webhooks.md, "Endpoints" and "Delivery").
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { type ApprovalEventType, ApprovalEventTypes } from "./Approvals.ts"
import { Timestamp, Uuid } from "./Common.ts"
import { InvalidUrl, NotReplayable, QueueFull, Replayed } from "./Deliveries.ts"
import { documented, notFound } from "./Documentation.ts"
import {
  BulkReplay,
  BulkReplayed,
  DeliveryFailed,
  EndpointStats,
  NotificationSettings,
  RotateSecret,
  TestDelivered,
  TestDelivery,
  UpdateNotificationSettings
} from "./EndpointOperations.ts"
import { CreateEndpoint, NotificationEndpoint, UpdateEndpoint } from "./EndpointSettings.ts"
import { InvalidHeaders, InvalidRequest, LimitReached, NotFound, Problem, RateLimited } from "./Errors.ts"
import * as Examples from "./Examples.ts"
import { Authentication, requireScope } from "./Security.ts"
import { DeliveryPage, DeliverySearch, type EventType } from "./WebhookDeliveries.ts"

export { DeliveryFailed, NotificationSettings } from "./EndpointOperations.ts"
export {
  CreateEndpoint,
  EndpointOrdering,
  MAX_RATE_LIMIT,
  NotificationEndpoint,
  UpdateEndpoint
} from "./EndpointSettings.ts"
export { EndpointEventTypes, type EventType, EventTypes, NotificationDelivery } from "./WebhookDeliveries.ts"

/** The six approval event types (spec "Events"), in lifecycle order: the default subscription. */
export const DefaultEventTypes: ReadonlyArray<ApprovalEventType> = ApprovalEventTypes

/** Event types that are also mailed to the reviewer address (approved and rejected are for webhook receivers only). */
export const EmailedEventTypes: ReadonlyArray<EventType> = [
  "approval.requested",
  "approval.expiring",
  "approval.escalated"
]

export class InvalidWebhookEvents extends Problem<InvalidWebhookEvents>()("InvalidWebhookEvents", {
  code: "INVALID_WEBHOOK_EVENTS",
  status: 400,
  title: "The events list is empty or names an unknown event type"
}, {
  field: Schema.optionalKey(Schema.String),
  supported: Schema.optionalKey(Schema.Array(Schema.String))
}) {}

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
        errors: {
          409: "The organization already has `SVC_MAX_ENDPOINTS_PER_ORG` endpoints (default 50; `LIMIT_REACHED`)."
        }
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
        errors: {
          404: notFound("endpoint"),
          409:
            "With `expire_previous: \"latest\"`, the new secret would make more than `SVC_WEBHOOK_MAX_SIGNING_SECRETS` secrets " +
            "(default 3) sign at once: wait until the oldest ends (the detail says when), rotate with `overlap_seconds: 0`, " +
            "or pass `expire_previous: \"all\"` (`LIMIT_REACHED`)."
        }
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
          502:
            "The receiver answered other than 2xx, or could not be reached within 5 s (`DELIVERY_FAILED`, with `receiver_status` or `error`; never the receiver's body).",
          429:
            "The endpoint was tested `SVC_WEBHOOK_TESTS_PER_MINUTE` times this minute (`RATE_LIMITED`, with `retry_after_seconds`)."
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
      documented({
        summary: "An endpoint's delivery statistics",
        response: Examples.endpointStats,
        errors: { 404: notFound("endpoint") }
      })
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
          429:
            "Confirmation mails of the organization over `SVC_REVIEWER_CONFIRMATIONS_PER_HOUR` (`RATE_LIMITED`, with `retry_after_seconds`); the address is not changed."
        },
        request: Examples.updateNotificationSettings,
        response: Examples.notificationSettings
      })
    )
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "Notification endpoints")
{}
