/** Errors shared by both delivery kinds (webhook deliveries, telemetry batches). */
import { Schema } from "effect"
import { HttpApiError } from "effect/http-api"
import type { ReplayError } from "../deliveries/Errors.ts"
import { NotFound, problemType } from "./Errors.ts"

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

/** What a replay the queue refused means to a client. */
export const replayProblem = (error: ReplayError): NotFound | NotReplayable | QueueFull => {
  switch (error._tag) {
    case "DeliveryNotFound":
      return new NotFound({ detail: "No such delivery." })
    case "DeliveryNotReplayable":
      return new NotReplayable({
        delivery_status: error.status,
        detail: error.status === "failed"
          ? "This delivery can no longer be sent again."
          : `Only a failed delivery can be replayed; this one is ${error.status}.`
      })
    case "DeliveryQueueFull":
      return new QueueFull({ detail: "The target's delivery queue is full; replay once it drains." })
  }
}
