/** The answer of a refused admission to the validation workers: `429 VALIDATION_BUSY` with `Retry-After`. */
import { ValidationBusy } from "../api/Errors.ts"
import { responseHeader } from "../platform/ResponseHeader.ts"

/** Seconds a refused client is asked to wait: a check takes milliseconds, so the queue moves within one. */
const VALIDATION_RETRY_AFTER_SECONDS = 1

/** Adds `Retry-After` to the answer of the current request. */
export const busyRetryAfter = responseHeader("retry-after", String(VALIDATION_RETRY_AFTER_SECONDS))

/** The `429 VALIDATION_BUSY` problem for the validation queue of `capacity` (send it with `busyRetryAfter`). */
export const validationBusy = (capacity: number, what: string) =>
  new ValidationBusy({
    limit: "SVC_ANSWER_VALIDATION_QUEUE",
    limit_value: capacity,
    detail:
      `The validation queue holds ${capacity} ${what} (SVC_ANSWER_VALIDATION_QUEUE) and this organization holds at least its share of them; retry after ${VALIDATION_RETRY_AFTER_SECONDS} second.`
  })
