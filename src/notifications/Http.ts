import { Effect, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { NotReplayable } from "../api/Deliveries.ts"
import { NotFound } from "../api/Errors.ts"
import { replayProblem } from "../api/ReplayProblem.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { publicHostOf, requireConsoleOrigin } from "../console/Csrf.ts"
import { DeliveryQueue } from "../deliveries/DeliveryQueue.ts"
import { DeliveryOperations } from "../deliveries/records/Operations.ts"
import { SvcConfig } from "../platform/Config.ts"
import { SecretBox } from "../platform/Crypto.ts"
import type { CursorMac } from "../platform/Cursor.ts"
import { iso } from "../platform/Time.ts"
import { searchDeliveries } from "./DeliverySearch.ts"
import { NotificationEndpoints } from "./Endpoints.ts"
import { ReviewerAddresses } from "./ReviewerAddress.ts"
import { TEST_META_KEY, TestDeliveries } from "./TestDelivery.ts"

/** The window of `GET /v1/notification-endpoints/:id/stats`. */
const STATS_HOURS = 24

/** A replay refused because the endpoint is inactive. */
const inactive = (endpoint: { readonly deactivated_reason: string | null }) =>
  new NotReplayable({
    delivery_status: "failed",
    detail: "The endpoint is inactive (" + (endpoint.deactivated_reason ?? "deactivated") +
      "); PATCH it to reactivate, then replay."
  })

export const NotificationsHandlers = HttpApiBuilder.group(
  Api,
  "notifications",
  Effect.fn(function*(handlers) {
    const endpoints = yield* NotificationEndpoints
    const addresses = yield* ReviewerAddresses
    const queue = yield* DeliveryQueue
    const config = yield* SvcConfig
    const operations = yield* DeliveryOperations
    const tests = yield* TestDeliveries
    const box = yield* SecretBox
    const mac: CursorMac = (message) => box.mac("cursor", message)
    return handlers.handleAll({
      list: () =>
        CurrentPrincipal.use((p) =>
          Effect.all({
            endpoints: endpoints.list(p.orgId),
            email_notifier: Effect.map(addresses.settings(p.orgId), (s) => s.email_notifier)
          })
        ),
      create: ({ payload }) => CurrentPrincipal.use((p) => endpoints.create(p.orgId, p.actor, payload)),
      update: ({ params, payload }) => CurrentPrincipal.use((p) => endpoints.update(p.orgId, params.id, payload)),
      remove: ({ params }) => CurrentPrincipal.use((p) => Effect.asVoid(endpoints.remove(p.orgId, params.id))),
      rotateSecret: ({ params, payload }) =>
        CurrentPrincipal.use((p) =>
          endpoints.rotateSecret(p.orgId, params.id, payload.overlap_seconds, payload.expire_previous)
        ),
      deliveries: ({ params, query }) =>
        Effect.gen(function*() {
          const p = yield* CurrentPrincipal
          yield* endpoints.find(p.orgId, params.id)
          return yield* searchDeliveries(queue, mac, p.orgId, params.id, query, config.deliverySearchScan)
        }),
      allDeliveries: ({ query }) =>
        CurrentPrincipal.use((p) => searchDeliveries(queue, mac, p.orgId, undefined, query, config.deliverySearchScan)),
      replay: ({ params }) =>
        Effect.gen(function*() {
          const p = yield* CurrentPrincipal
          const endpoint = yield* endpoints.find(p.orgId, params.id)
          if (!endpoint.active) {
            // An absent or unfinished delivery answers as it would on an active endpoint.
            const delivery = Option.filter(
              yield* queue.get({ orgId: p.orgId, kind: "webhook", deliveryId: params.delivery }),
              (d) => d.targetId === endpoint.id
            )
            if (Option.isNone(delivery)) return yield* new NotFound({ detail: "No such delivery." })
            const status = delivery.value.status === "partial" ? "failed" : delivery.value.status
            if (status !== "failed") {
              return yield* new NotReplayable({
                delivery_status: status,
                detail: `Only a failed delivery can be replayed; this one is ${status}.`
              })
            }
            return yield* inactive(endpoint)
          }
          return yield* queue.replay({
            orgId: p.orgId,
            kind: "webhook",
            targetId: params.id,
            deliveryId: params.delivery,
            capacity: config.webhookQueueCapacity,
            // A test delivery is never sent again.
            replayable: (delivery) => delivery.meta[TEST_META_KEY] !== true
          }).pipe(Effect.mapError(replayProblem))
        }),
      test: ({ params, payload }) => CurrentPrincipal.use((p) => tests.send(p.orgId, params.id, payload.event_type)),
      replayFailed: ({ params, payload }) =>
        Effect.gen(function*() {
          const p = yield* CurrentPrincipal
          const endpoint = yield* endpoints.find(p.orgId, params.id)
          const dryRun = payload.dry_run === true
          if (!endpoint.active && !dryRun) return yield* inactive(endpoint)
          const result = yield* operations.replayWindow({
            orgId: p.orgId,
            kind: "webhook",
            targetId: params.id,
            since: payload.since,
            until: payload.until,
            dryRun,
            capacity: config.webhookQueueCapacity,
            max: config.webhookReplayMax,
            excludeMetaKey: TEST_META_KEY
          })
          return {
            matched: result.matched,
            queued: result.queued,
            not_queued: result.notQueued,
            ...(result.nextSince === null ? {} : { next_since: iso(result.nextSince) })
          }
        }),
      stats: ({ params }) =>
        Effect.gen(function*() {
          const p = yield* CurrentPrincipal
          yield* endpoints.find(p.orgId, params.id)
          const stats = yield* operations.stats({
            orgId: p.orgId,
            kind: "webhook",
            targetId: params.id,
            hours: STATS_HOURS,
            excludeMetaKey: TEST_META_KEY
          })
          const finished = stats.delivered + stats.failed
          return {
            since: iso(stats.since),
            delivered: stats.delivered,
            failed: stats.failed,
            pending: stats.pending,
            success_rate: finished === 0 ? null : Math.round((stats.delivered / finished) * 10_000) / 10_000,
            duration_ms_p50: stats.durationP50,
            duration_ms_p95: stats.durationP95
          }
        }),
      getSettings: () => CurrentPrincipal.use((p) => addresses.settings(p.orgId)),
      updateSettings: ({ payload }) => CurrentPrincipal.use((p) => addresses.set(p.orgId, payload.reviewer_email))
    })
  })
)

/** Handler of the confirmation links of reviewer addresses. */
export const ReviewerConfirmationHandlers = HttpApiBuilder.group(
  Api,
  "reviewerConfirmation",
  Effect.fn(function*(handlers) {
    const addresses = yield* ReviewerAddresses
    const publicHost = publicHostOf((yield* SvcConfig).publicUrl)
    return handlers.handleAll({
      // Confirming changes state: the console's request rules apply (its
      // header, its own origin), so no other site can post one.
      confirmAddress: ({ payload }) =>
        Effect.andThen(requireConsoleOrigin(publicHost), addresses.confirm(payload.token))
    })
  })
)
