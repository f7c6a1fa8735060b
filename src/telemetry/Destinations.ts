/**
 * Telemetry destinations: the organization's one OTLP/HTTP collector
 * (create, list, test, delete) and its delivery records (list, replay).
 * Batches travel through the shared delivery queue (`src/deliveries`) as
 * kind `telemetry`; `Export.ts` fills and drains it.
 */
import { PgClient } from "@effect/sql-pg"
import { Array as Arr, Clock, Context, Effect, Layer, Option, Redacted } from "effect"
import { InvalidUrl, type NotReplayable, type QueueFull } from "../api/Deliveries.ts"
import { headersRefused, type InvalidHeaders, type InvalidRequest, NotFound } from "../api/Errors.ts"
import { replayProblem } from "../api/ReplayProblem.ts"
import {
  type CreatedTelemetryDestination,
  DestinationExists,
  ExportFailed,
  type TelemetryCompression,
  type TelemetryDelivery,
  type TelemetryDestination,
  type TelemetryProtocol
} from "../api/Telemetry.ts"
import { type Delivery, DeliveryQueue } from "../deliveries/DeliveryQueue.ts"
import { encodeRequest, type OtlpSpan, serviceResource, SpanKind, StatusCode } from "../otlp/Encoding.ts"
import { checkHeaders } from "../outbound/HeaderRules.ts"
import { OutboundHttp } from "../outbound/OutboundHttp.ts"
import { SvcConfig } from "../platform/Config.ts"
import { SecretBox } from "../platform/Crypto.ts"
import { type CursorMac, cursorRefused } from "../platform/Cursor.ts"
import { newId } from "../platform/Ids.ts"
import { iso, isoOrNull } from "../platform/Time.ts"
import { destinationUrlOwner, readReceiverUrl, SEALED_URL_COLUMN, URL_SECRET } from "../secrets/ReceiverUrls.ts"
import { SecretStore } from "../secrets/SecretStore.ts"
import { SpanBuffers } from "./Buffers.ts"
import { type CollectorTarget, compress, exportBody, scrub } from "./Collector.ts"
import { type DestinationRow, DestinationsRepo } from "./Repository.ts"

/** A search of a destination's records: a status, time ranges, a page. */
export interface DeliveryQuery {
  readonly status?: TelemetryDelivery["status"] | undefined
  readonly created_from?: string | undefined
  readonly created_until?: string | undefined
  readonly finished_from?: string | undefined
  readonly finished_until?: string | undefined
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
}

/** How long a failed batch stays kept (sealed) for replay. */
export const KEEP_FAILED_HOURS = 24
/** How long finished delivery records stay. */
export const KEEP_RECORDS_DAYS = 7

/** What a create says; protocol and compression have their defaults (`http/json`, `none`). */
export interface DestinationInput {
  readonly url: string
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly protocol?: TelemetryProtocol | undefined
  readonly compression?: TelemetryCompression | undefined
}

const owner = (orgId: string, id: string) => ({ orgId, kind: "telemetry_destination" as const, id })

const toStatus = (delivery: Delivery): TelemetryDelivery["status"] =>
  delivery.status === "delivered" || delivery.status === "failed" || delivery.status === "partial"
    ? delivery.status
    : "pending"

const num = (value: unknown) => (typeof value === "number" ? value : typeof value === "string" ? Number(value) || 0 : 0)

/**
 * A delivery as the API lists it. `clean` masks what the destination
 * protects in the collector's words once more on the way out (records kept
 * from before a value was masked at write time).
 */
const toDeliveryRecord = (
  delivery: Delivery,
  clean: (text: string) => string = (text) => text
): TelemetryDelivery => {
  const warning = delivery.meta.warning
  return {
    id: delivery.id,
    status: toStatus(delivery),
    span_count: num(delivery.meta.span_count),
    rejected_spans: num(delivery.meta.rejected_spans),
    attempts: delivery.attempts,
    last_error: delivery.lastError === null ? null : clean(delivery.lastError),
    ...(typeof warning === "string" ? { warning: clean(warning) } : {}),
    created_at: iso(delivery.createdAt),
    finished_at: isoOrNull(delivery.finishedAt)
  }
}

/** The sealing context of a destination's batches: a sealed batch copied to another destination does not open. */
export const batchContext = (destinationId: string) => `telemetry_batch:${destinationId}`

/** The span a destination's test sends, at `now` (Unix nanoseconds). */
const testSpan = (orgId: string, id: string, now: bigint): OtlpSpan => ({
  traceId: randomHex(16),
  spanId: randomHex(8),
  name: "svc.telemetry.test",
  kind: SpanKind.internal,
  startTimeUnixNano: now.toString(),
  endTimeUnixNano: now.toString(),
  attributes: [
    { key: "svc.org_id", value: { stringValue: orgId } },
    { key: "svc.telemetry_destination_id", value: { stringValue: id } }
  ],
  status: { code: StatusCode.Unset }
})

export class TelemetryDestinations extends Context.Service<TelemetryDestinations, {
  readonly create: (
    orgId: string,
    input: DestinationInput
  ) => Effect.Effect<typeof CreatedTelemetryDestination.Type, InvalidUrl | InvalidHeaders | DestinationExists>
  readonly list: (orgId: string) => Effect.Effect<ReadonlyArray<TelemetryDestination>>
  readonly test: (orgId: string, id: string) => Effect.Effect<{ readonly delivered: boolean }, NotFound | ExportFailed>
  readonly remove: (orgId: string, id: string) => Effect.Effect<void, NotFound>
  readonly deliveries: (orgId: string, id: string, query: DeliveryQuery) => Effect.Effect<
    { readonly deliveries: ReadonlyArray<TelemetryDelivery>; readonly next_cursor: string | null },
    NotFound | InvalidRequest
  >
  readonly replay: (
    orgId: string,
    id: string,
    deliveryId: string
  ) => Effect.Effect<{ readonly queued: true; readonly id: string }, NotFound | NotReplayable | QueueFull>
  /** The collector of a destination (URL and opened header values), for the export worker. */
  readonly target: (id: string) => Effect.Effect<Option.Option<CollectorTarget & { readonly orgId: string }>>
}>()("svc/telemetry/TelemetryDestinations") {
  static readonly layer = Layer.effect(
    TelemetryDestinations,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const repo = yield* DestinationsRepo
      const secrets = yield* SecretStore
      const outbound = yield* OutboundHttp
      const queue = yield* DeliveryQueue
      const buffers = yield* SpanBuffers
      const config = yield* SvcConfig
      const box = yield* SecretBox
      const mac: CursorMac = (message) => box.mac("cursor", message)

      const notFound = () => new NotFound({ detail: "No such telemetry destination." })

      const orNotFound = <A>(found: Effect.Effect<Option.Option<A>>) =>
        Effect.flatMap(found, Option.match({ onNone: () => Effect.fail(notFound()), onSome: Effect.succeed }))
      const find = (orgId: string, id: string) => orNotFound(repo.get(orgId, id))

      /** The collector of `row`; none when the destination was deleted since `row` was read (its URL is gone). */
      const targetOf = (row: DestinationRow) =>
        Effect.gen(function*() {
          const url = yield* readReceiverUrl(destinationUrlOwner(row.org_id, row.id), row.url).pipe(
            Effect.provideService(SecretStore, secrets)
          )
          if (url === undefined) return Option.none()
          const stored = yield* secrets.list(owner(row.org_id, row.id))
          return Option.some({
            orgId: row.org_id,
            protocol: row.protocol,
            compression: row.compression,
            url,
            headers: stored.map((secret) => [secret.name, secret.value] as const)
          })
        })
      const foundTarget = (row: DestinationRow) => orNotFound(targetOf(row))

      const create = Effect.fn("TelemetryDestinations.create")(function*(
        orgId: string,
        input: DestinationInput
      ) {
        const verdict = checkHeaders(input.headers ?? {})
        if (verdict._tag === "Refused") return yield* headersRefused(verdict)
        const checked = yield* outbound.check(input.url, orgId).pipe(
          Effect.mapError((unsafe) => new InvalidUrl({ field: "url", detail: `url: ${unsafe.message}.` }))
        )
        const id = newId()
        const protocol = input.protocol ?? "http/json"
        const compression = input.compression ?? "none"
        const inserted = yield* sql.withTransaction(Effect.gen(function*() {
          const row = yield* repo.insert({
            id,
            orgId,
            url: SEALED_URL_COLUMN,
            urlHint: checked.urlHint,
            protocol,
            compression
          })
          if (Option.isNone(row)) return false
          yield* secrets.put(destinationUrlOwner(orgId, id), URL_SECRET, Redacted.make(checked.url))
          for (const [name, value] of verdict.headers) {
            yield* secrets.put(owner(orgId, id), name, Redacted.make(value))
          }
          return true
        })).pipe(Effect.orDie)
        if (!inserted) {
          return yield* new DestinationExists({
            detail: "The organization already has a telemetry destination; delete it before configuring another."
          })
        }
        buffers.activate(orgId, id)
        yield* Effect.annotateCurrentSpan({ "svc.telemetry_destination_id": id })
        return { id, url_hint: checked.urlHint, protocol, compression }
      })

      const list = Effect.fn("TelemetryDestinations.list")(function*(orgId: string) {
        const rows = yield* repo.forOrg(orgId)
        // A destination deleted since `forOrg` read it is left out.
        const listed = yield* Effect.forEach(rows, (row) =>
          Effect.map(
            Effect.all([queue.undeliveredMetaSum("telemetry", row.id, "span_count"), targetOf(row)]),
            ([queued, kept]) =>
              Option.map(kept, (target): TelemetryDestination => ({
                id: row.id,
                url_hint: row.url_hint,
                protocol: row.protocol,
                compression: row.compression,
                created_at: row.created_at,
                last_delivered_at: row.last_delivered_at,
                last_error: row.last_error === null ? null : scrub(row.last_error, target),
                pending_spans: queued + buffers.size(row.id) + buffers.sending(row.id),
                dropped_spans: Number(row.dropped_spans) + buffers.unsavedDropped(row.id)
              }))
          ))
        return Arr.getSomes(listed)
      })

      const test = Effect.fn("TelemetryDestinations.test")(function*(orgId: string, id: string) {
        const row = yield* find(orgId, id)
        const target = yield* foundTarget(row)
        const span = testSpan(orgId, id, BigInt(yield* Clock.currentTimeMillis) * 1_000_000n)
        const body = compress(encodeRequest([span], serviceResource()))
        const { result } = yield* exportBody(target, body, 1, config.telemetryExportTimeout).pipe(
          Effect.provideService(OutboundHttp, outbound)
        )
        switch (result._tag) {
          case "Accepted":
            yield* repo.recordSuccess(id, null)
            return { delivered: true }
          case "Partial":
            yield* repo.recordError(id, result.error)
            return yield* new ExportFailed({
              collector_status: result.status,
              detail: `The collector answered ${result.status} but rejected the test span.`
            })
          default:
            yield* repo.recordError(id, result.error)
            return yield* new ExportFailed({
              ...(result.status === undefined ? {} : { collector_status: result.status }),
              detail: result.status === undefined
                ? `The collector could not be reached (${result.error}).`
                : `The collector answered ${result.status}.`
            })
        }
      })

      const remove = Effect.fn("TelemetryDestinations.remove")(function*(orgId: string, id: string) {
        const removed = yield* sql.withTransaction(Effect.gen(function*() {
          const gone = yield* repo.remove(orgId, id)
          if (!gone) return false
          yield* secrets.removeOwner(owner(orgId, id))
          yield* secrets.removeOwner(destinationUrlOwner(orgId, id))
          yield* queue.removeTarget("telemetry", id, "destination deleted", { dropPayloads: true })
          return true
        })).pipe(Effect.orDie)
        if (!removed) return yield* notFound()
        // Export stops at once here; other processes stop at their next
        // refresh, and their worker finds the destination gone before sending.
        buffers.deactivate(orgId)
        yield* queue.prunePayloads("telemetry", KEEP_FAILED_HOURS)
      })

      const deliveries = Effect.fn("TelemetryDestinations.deliveries")(
        function*(orgId: string, id: string, query: DeliveryQuery) {
          const target = yield* foundTarget(yield* find(orgId, id))
          const { status, limit, cursor, ...times } = query
          const page = yield* queue.searchPage(mac, {
            orgId,
            list: "telemetry-deliveries",
            filters: [id, status, ...Object.values(times)]
          }, {
            orgId,
            kind: "telemetry",
            targetId: id,
            statuses: status === undefined
              ? undefined
              : status === "pending"
              ? ["queued", "sending", "retrying"]
              : [status],
            createdFrom: times.created_from,
            createdUntil: times.created_until,
            finishedFrom: times.finished_from,
            finishedUntil: times.finished_until,
            scan: config.deliverySearchScan
          }, { limit, cursor }).pipe(Effect.catchTag("UnknownCursor", () => Effect.fail(cursorRefused())))
          return {
            deliveries: page.items.map(({ delivery }) => toDeliveryRecord(delivery, (text) => scrub(text, target))),
            next_cursor: page.next_cursor
          }
        }
      )

      const replay = Effect.fn("TelemetryDestinations.replay")(
        function*(orgId: string, id: string, deliveryId: string) {
          yield* find(orgId, id)
          return yield* queue.replay({
            orgId,
            kind: "telemetry",
            targetId: id,
            deliveryId,
            capacity: config.telemetryQueueBatches,
            // The batch is kept (sealed) for a bounded time only.
            replayable: (delivery) => delivery.payload !== null
          }).pipe(Effect.mapError(replayProblem))
        }
      )

      const target = Effect.fn("TelemetryDestinations.target")(function*(id: string) {
        const row = yield* repo.byId(id)
        if (Option.isNone(row)) return Option.none()
        return yield* targetOf(row.value)
      })

      return TelemetryDestinations.of({ create, list, test, remove, deliveries, replay, target })
    })
  )
}

const randomHex = (bytes: number) => {
  for (;;) {
    const hex = globalThis.crypto.getRandomValues(new Uint8Array(bytes)).reduce(
      (out, byte) => out + byte.toString(16).padStart(2, "0"),
      ""
    )
    if (!/^0+$/.test(hex)) return hex
  }
}
