/**
 * The delivery log's search as the API asks for it (`GET
 * /v1/notification-endpoints/:id/deliveries`, `GET /v1/deliveries`): the
 * query's filters to the queue's search (`src/deliveries/records/Search.ts`),
 * its rows to records, and a cursor bound to the organization, the list and
 * every filter.
 */
import { Effect } from "effect"
import type { NotificationDelivery } from "../api/Notifications.ts"
import type { DeliverySearch } from "../api/WebhookDeliveries.ts"
import type { DeliveryQueue } from "../deliveries/DeliveryQueue.ts"
import type { Found, StatusCodeFilter } from "../deliveries/records/Search.ts"
import { type CursorMac, cursorRefused } from "../platform/Cursor.ts"
import { iso, isoOrNull } from "../platform/Time.ts"

type Query = { readonly [K in keyof typeof DeliverySearch]?: (typeof DeliverySearch)[K]["Type"] }

/** `5xx` a class, `503` a code (the query's pattern has checked it). */
const statusCodeOf = (text: string): StatusCodeFilter =>
  text.endsWith("xx") ? { _tag: "Class", digit: Number(text[0]) } : { _tag: "Code", code: Number(text) }

const toRecord = ({ delivery, statusCode }: Found): NotificationDelivery => ({
  id: delivery.id,
  endpoint_id: delivery.targetId,
  event_id: delivery.eventId ?? "",
  label: delivery.label,
  // Webhook deliveries are never partial; the queue's other statuses are the API's.
  status: delivery.status === "partial" ? "failed" : delivery.status,
  status_code: statusCode,
  attempts: delivery.attempts,
  replays: delivery.replays,
  last_error: delivery.lastError,
  created_at: iso(delivery.createdAt),
  finished_at: isoOrNull(delivery.finishedAt)
})

/** A page of the organization's webhook deliveries (of one endpoint, with `endpointId`) matching `query`. */
export const searchDeliveries = Effect.fnUntraced(function*(
  queue: DeliveryQueue["Service"],
  mac: CursorMac,
  orgId: string,
  endpointId: string | undefined,
  query: Query,
  scan: number
) {
  const filters = [
    endpointId,
    query.status,
    query.status_code,
    query.event_type,
    query.event_id,
    query.approval_id,
    query.action_class,
    query.label,
    query.created_from,
    query.created_until,
    query.finished_from,
    query.finished_until
  ]
  const page = yield* queue.searchPage(mac, { orgId, list: "deliveries", filters }, {
    orgId,
    kind: "webhook",
    targetId: endpointId,
    statuses: query.status === undefined ? undefined : [query.status],
    statusCode: query.status_code === undefined ? undefined : statusCodeOf(query.status_code),
    eventType: query.event_type,
    eventId: query.event_id,
    approvalId: query.approval_id,
    actionClass: query.action_class,
    label: query.label,
    createdFrom: query.created_from,
    createdUntil: query.created_until,
    finishedFrom: query.finished_from,
    finishedUntil: query.finished_until,
    scan
  }, { limit: query.limit, cursor: query.cursor }).pipe(
    Effect.catchTag("UnknownCursor", () => Effect.fail(cursorRefused()))
  )
  return { deliveries: page.items.map(toRecord), next_cursor: page.next_cursor }
})
