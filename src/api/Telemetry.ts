/**
 * Telemetry destinations: one OTLP/HTTP trace collector (JSON or
 * protobuf) per organization (docs/telemetry.md, "The destination", "Delivery records
 * and replay").
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Cursor, Limit, NextCursor, Timestamp, UrlOf, Uuid } from "./Common.ts"
import { InvalidUrl, NotReplayable, QueueFull, Replayed } from "./Deliveries.ts"
import { documented, notFound } from "./Documentation.ts"
import { InvalidHeaders, InvalidRequest, NotFound, Problem } from "./Errors.ts"
import * as Examples from "./Examples.ts"
import { CustomHeaders, TRANSPORT_HEADERS } from "./HeaderNames.ts"
import { Authentication, requireScope } from "./Security.ts"
import { DeliverySearch } from "./WebhookDeliveries.ts"

export class DestinationExists extends Problem<DestinationExists>()("DestinationExists", {
  code: "DESTINATION_EXISTS",
  status: 409,
  title: "The organization already has a telemetry destination"
}) {}

/** The collector did not accept the test span; names its status, never its body. */
export class ExportFailed extends Problem<ExportFailed>()("ExportFailed", {
  code: "EXPORT_FAILED",
  status: 502,
  title: "The collector did not accept the span"
}, {
  collector_status: Schema.optionalKey(Schema.Int)
}) {}

/** How batches are written: OTLP/HTTP JSON or OTLP/HTTP protobuf. */
export const TelemetryProtocol = Schema.Literals(["http/json", "http/protobuf"]).annotate({
  description:
    "The OTLP/HTTP encoding: `http/json` (`application/json`, the default) or `http/protobuf` (`application/x-protobuf`)"
})
export type TelemetryProtocol = typeof TelemetryProtocol.Type

/** Whether request bodies are gzipped (`Content-Encoding: gzip`). */
export const TelemetryCompression = Schema.Literals(["none", "gzip"]).annotate({
  description: "Request body compression: `none` (the default) or `gzip` (`Content-Encoding: gzip`)"
})
export type TelemetryCompression = typeof TelemetryCompression.Type

export const TelemetryDestination = Schema.Struct({
  id: Uuid,
  url_hint: Schema.String,
  protocol: TelemetryProtocol,
  compression: TelemetryCompression,
  created_at: Timestamp,
  last_delivered_at: Schema.NullOr(Timestamp),
  last_error: Schema.NullOr(Schema.String),
  pending_spans: Schema.Int,
  dropped_spans: Schema.Int
})
export type TelemetryDestination = typeof TelemetryDestination.Type

export const CreateTelemetryDestination = Schema.Struct({
  url: UrlOf(["https"], "Expected an https URL").annotate({
    description:
      "Public HTTPS URL of the collector's OTLP/HTTP traces endpoint (e.g. `https://collector.example.com/v1/traces`), at most 2048 characters"
  }),
  headers: Schema.optionalKey(
    CustomHeaders(
      [TRANSPORT_HEADERS],
      "Headers sent with every export (e.g. `Authorization`), at most 10. Values are encrypted at rest and never returned. Transport, hop-by-hop, trace-context and cookie headers are refused (`INVALID_HEADERS`), as are two names differing only in case and a value over 4096 UTF-8 bytes."
    )
  ),
  protocol: Schema.optionalKey(TelemetryProtocol),
  compression: Schema.optionalKey(TelemetryCompression)
})

export const CreatedTelemetryDestination = Schema.Struct({
  id: Uuid,
  url_hint: Schema.String,
  protocol: TelemetryProtocol,
  compression: TelemetryCompression
})

const TelemetryDeliveryStatus = Schema.Literals(["pending", "delivered", "failed", "partial"])

export const TelemetryDelivery = Schema.Struct({
  id: Uuid,
  status: TelemetryDeliveryStatus,
  span_count: Schema.Int,
  rejected_spans: Schema.Int,
  attempts: Schema.Int,
  last_error: Schema.NullOr(Schema.String),
  /** Set when the collector accepted everything but said something (`partialSuccess.errorMessage`). */
  warning: Schema.optionalKey(Schema.String),
  created_at: Timestamp,
  finished_at: Schema.NullOr(Timestamp)
})
export type TelemetryDelivery = typeof TelemetryDelivery.Type

const DestinationParams = { id: Uuid }

export class TelemetryApi extends HttpApiGroup.make("telemetry")
  .add(
    HttpApiEndpoint.get("list", "/v1/telemetry-destinations", {
      success: Schema.Struct({ destinations: Schema.Array(TelemetryDestination) })
    }).pipe(
      requireScope("org_config.read", "The organization's telemetry destination (at most one)."),
      documented({ summary: "Get the telemetry destination", response: Examples.destinationList })
    ),
    HttpApiEndpoint.post("create", "/v1/telemetry-destinations", {
      payload: CreateTelemetryDestination,
      success: CreatedTelemetryDestination.pipe(HttpApiSchema.status(201)),
      error: [InvalidUrl, InvalidHeaders, DestinationExists]
    }).pipe(
      requireScope(
        "org_config.write",
        "Configures the organization's one OTLP/HTTP trace collector (JSON or protobuf, optionally gzipped). A second one is refused with 409 `DESTINATION_EXISTS`."
      ),
      documented({
        summary: "Create the telemetry destination",
        request: Examples.createDestination,
        response: Examples.createdDestination
      })
    ),
    HttpApiEndpoint.post("test", "/v1/telemetry-destinations/:id/test", {
      params: DestinationParams,
      success: Schema.Struct({ delivered: Schema.Boolean }),
      error: [NotFound, ExportFailed]
    }).pipe(
      requireScope("org_config.write", "Exports one test span at once."),
      documented({ summary: "Send a test span", response: Examples.testDelivered })
    ),
    HttpApiEndpoint.delete("remove", "/v1/telemetry-destinations/:id", {
      params: DestinationParams,
      success: HttpApiSchema.NoContent,
      error: NotFound
    }).pipe(
      requireScope("org_config.write", "Removes the destination: export stops at once and buffered spans are dropped."),
      documented({
        summary: "Delete the telemetry destination",
        errors: { 404: notFound("destination") }
      })
    ),
    HttpApiEndpoint.get("deliveries", "/v1/telemetry-destinations/:id/deliveries", {
      params: DestinationParams,
      query: {
        status: Schema.optionalKey(TelemetryDeliveryStatus.annotate({ description: "Only records with this status" })),
        created_from: DeliverySearch.created_from,
        created_until: DeliverySearch.created_until,
        finished_from: DeliverySearch.finished_from,
        finished_until: DeliverySearch.finished_until,
        limit: Limit,
        cursor: Cursor
      },
      success: Schema.Struct({
        deliveries: Schema.Array(TelemetryDelivery),
        next_cursor: NextCursor.annotate({
          description: "Pass as `cursor`, with the same filters, for the next (older) page; null on the last page"
        })
      }),
      error: [NotFound, InvalidRequest]
    }).pipe(
      requireScope(
        "org_config.read",
        "The destination's delivery records (batches), newest first: the latest 50 without filters; `limit` up to 100, a status and time ranges (all must hold), and `cursor` for older pages."
      ),
      documented({
        summary: "List telemetry deliveries",
        response: Examples.telemetryDeliveries,
        errors: { 404: notFound("destination") }
      })
    ),
    HttpApiEndpoint.post("replay", "/v1/telemetry-destinations/:id/deliveries/:delivery/replay", {
      params: { id: Uuid, delivery: Uuid },
      success: Replayed,
      error: [NotFound, NotReplayable, QueueFull]
    }).pipe(
      requireScope(
        "org_config.write",
        "Sends a failed batch again. A partially accepted batch is not replayable (OTLP does not say which spans were rejected)."
      ),
      documented({ summary: "Replay a telemetry delivery", response: Examples.replayed })
    )
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "Telemetry destinations")
{}
