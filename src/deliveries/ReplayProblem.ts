/**
 * What a replay the queue refused means to a client: the handlers of both
 * delivery kinds (webhook endpoints, telemetry destinations) answer the
 * queue's own errors with these problems. The queue itself knows no HTTP.
 */
import { NotReplayable, QueueFull } from "../api/Deliveries.ts"
import { NotFound } from "../api/Errors.ts"
import type { ReplayError } from "./Errors.ts"

/** The problem that answers a refused replay. */
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
