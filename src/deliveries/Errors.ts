/**
 * What the delivery queue fails with. Its own errors, not HTTP problems:
 * the handlers that call it say what they mean to a client
 * (`replayProblem` in `src/api/ReplayProblem.ts`).
 */
import { Data } from "effect"
import type { DeliveryStatus } from "./Types.ts"

/** No such delivery (of this organization, kind and target). */
export class DeliveryNotFound extends Data.TaggedError("DeliveryNotFound")<{ readonly deliveryId: string }> {}

/** Only a failed delivery whose payload is still kept can be replayed. */
export class DeliveryNotReplayable extends Data.TaggedError("DeliveryNotReplayable")<{
  readonly deliveryId: string
  readonly status: DeliveryStatus
}> {}

/** The target already holds its capacity of undelivered deliveries. */
export class DeliveryQueueFull extends Data.TaggedError("DeliveryQueueFull")<{ readonly targetId: string }> {}
