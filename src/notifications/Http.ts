import { Effect, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { NotReplayable } from "../api/Deliveries.ts"
import { NotFound } from "../api/Errors.ts"
import type { NotificationDelivery } from "../api/Notifications.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { type Delivery, DeliveryQueue } from "../deliveries/DeliveryQueue.ts"
import { SvcConfig } from "../platform/Config.ts"
import { iso, isoOrNull } from "../platform/Time.ts"
import { NotificationEndpoints } from "./Endpoints.ts"

const toDelivery = (delivery: Delivery): NotificationDelivery => ({
  id: delivery.id,
  event_id: delivery.eventId ?? "",
  label: delivery.label,
  // Webhook deliveries are never partial; the queue's other statuses are the API's.
  status: delivery.status === "partial" ? "failed" : delivery.status,
  attempts: delivery.attempts,
  replays: delivery.replays,
  last_error: delivery.lastError,
  created_at: iso(delivery.createdAt),
  finished_at: isoOrNull(delivery.finishedAt)
})

export const NotificationsHandlers = HttpApiBuilder.group(
  Api,
  "notifications",
  Effect.fn(function*(handlers) {
    const endpoints = yield* NotificationEndpoints
    const queue = yield* DeliveryQueue
    const config = yield* SvcConfig
    return handlers.handleAll({
      list: () =>
        CurrentPrincipal.use((p) =>
          Effect.all({ endpoints: endpoints.list(p.orgId), email_notifier: endpoints.emailNotifier(p.orgId) })
        ),
      create: ({ payload }) => CurrentPrincipal.use((p) => endpoints.create(p.orgId, p.actor, payload)),
      update: ({ params, payload }) => CurrentPrincipal.use((p) => endpoints.update(p.orgId, params.id, payload.events)),
      remove: ({ params }) =>
        CurrentPrincipal.use((p) =>
          Effect.gen(function*() {
            yield* endpoints.remove(p.orgId, params.id)
            yield* queue.removeTarget("webhook", params.id, "endpoint deleted")
          })
        ),
      rotateSecret: ({ params, payload }) =>
        CurrentPrincipal.use((p) => endpoints.rotateSecret(p.orgId, params.id, payload.overlap_seconds)),
      deliveries: ({ params }) =>
        CurrentPrincipal.use((p) =>
          Effect.gen(function*() {
            yield* endpoints.find(p.orgId, params.id)
            const list = yield* queue.list({ orgId: p.orgId, kind: "webhook", targetId: params.id, limit: 50 })
            return { deliveries: list.map(toDelivery) }
          })
        ),
      replay: ({ params }) =>
        CurrentPrincipal.use((p) =>
          Effect.gen(function*() {
            const endpoint = yield* endpoints.find(p.orgId, params.id)
            if (!endpoint.active) {
              // An absent or unfinished delivery answers as it would on an active endpoint.
              const delivery = Option.filter(
                yield* queue.get({ orgId: p.orgId, kind: "webhook", deliveryId: params.delivery }),
                (d) => d.targetId === endpoint.id
              )
              if (Option.isNone(delivery)) return yield* new NotFound({ detail: "No such delivery." })
              const status = toDelivery(delivery.value).status
              if (status !== "failed") {
                return yield* new NotReplayable({
                  delivery_status: status,
                  detail: `Only a failed delivery can be replayed; this one is ${status}.`
                })
              }
              return yield* new NotReplayable({
                delivery_status: "failed",
                detail: "The endpoint is inactive (" + (endpoint.deactivated_reason ?? "deactivated") +
                  "); PATCH it to reactivate, then replay."
              })
            }
            return yield* queue.replay({
              orgId: p.orgId,
              kind: "webhook",
              targetId: params.id,
              deliveryId: params.delivery,
              capacity: config.webhookQueueCapacity
            })
          })
        ),
      getSettings: () =>
        CurrentPrincipal.use((p) =>
          Effect.all({ reviewer_email: endpoints.reviewerEmail(p.orgId), email_notifier: endpoints.emailNotifier(p.orgId) })
        ),
      updateSettings: ({ payload }) =>
        CurrentPrincipal.use((p) =>
          Effect.gen(function*() {
            const reviewer_email = yield* endpoints.setReviewerEmail(p.orgId, payload.reviewer_email)
            return { reviewer_email, email_notifier: yield* endpoints.emailNotifier(p.orgId) }
          })
        )
    })
  })
)
