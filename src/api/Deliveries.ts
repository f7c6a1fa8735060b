/** Errors shared by both delivery kinds (webhook deliveries, telemetry batches). */
import { Schema } from "effect"
import { Problem } from "./Errors.ts"

export class NotReplayable extends Problem<NotReplayable>()("NotReplayable", {
  code: "NOT_REPLAYABLE",
  status: 409,
  title: "The delivery cannot be replayed"
}, {
  delivery_status: Schema.optionalKey(Schema.String)
}) {}

export class QueueFull
  extends Problem<QueueFull>()("QueueFull", { code: "QUEUE_FULL", status: 409, title: "The delivery queue is full" })
{}

export class InvalidUrl extends Problem<InvalidUrl>()("InvalidUrl", {
  code: "INVALID_URL",
  status: 400,
  title: "The URL is not an allowed public HTTPS address"
}, {
  field: Schema.optionalKey(Schema.String)
}) {}

export const Replayed = Schema.Struct({ queued: Schema.Literal(true), id: Schema.String })
