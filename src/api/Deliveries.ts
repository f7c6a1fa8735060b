/** Errors shared by both delivery kinds (webhook deliveries, telemetry batches). */
import { Schema } from "effect"
import { HttpApiError } from "effect/http-api"
import { problemType } from "./Errors.ts"

export class NotReplayable extends HttpApiError.Problem<NotReplayable>()("NotReplayable", {
  type: problemType("NOT_REPLAYABLE"),
  status: 409,
  title: "The delivery cannot be replayed"
}, {
  code: Schema.tag("NOT_REPLAYABLE"),
  delivery_status: Schema.optionalKey(Schema.String)
}) {}

export class QueueFull extends HttpApiError.Problem<QueueFull>()("QueueFull", {
  type: problemType("QUEUE_FULL"),
  status: 409,
  title: "The delivery queue is full"
}, {
  code: Schema.tag("QUEUE_FULL")
}) {}

export class InvalidUrl extends HttpApiError.Problem<InvalidUrl>()("InvalidUrl", {
  type: problemType("INVALID_URL"),
  status: 400,
  title: "The URL is not an allowed public HTTPS address"
}, {
  code: Schema.tag("INVALID_URL"),
  field: Schema.optionalKey(Schema.String)
}) {}

export const Replayed = Schema.Struct({ queued: Schema.Literal(true), id: Schema.String })
