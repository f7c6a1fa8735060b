/**
 * What a replay the queue refused means to a client: the handlers of both
 * delivery kinds (webhook endpoints, telemetry destinations) answer the
 * queue's own errors with these problems. The queue itself knows no HTTP.
 */
import { NotReplayable, QueueFull } from "./Deliveries.ts"
import { NotFound } from "./Errors.ts"

/**
 * The refusals a replay can meet, by their tags (the delivery queue's own
 * errors have this shape; the API imports nothing from the server side).
 */
export type ReplayRefusal =
  | { readonly _tag: "DeliveryNotFound" }
  | { readonly _tag: "DeliveryNotReplayable"; readonly status: string }
  | { readonly _tag: "DeliveryQueueFull" }

/** The problem that answers a refused replay. */
export const replayProblem = (error: ReplayRefusal): NotFound | NotReplayable | QueueFull => {
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
