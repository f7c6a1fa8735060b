/**
 * A tenant's JSON Schema checked by the validation workers (`AnswerSchema.ts`)
 * when it is stored, and what they refuse as the API's problems: a task's
 * `answer_schema`, an approval policy's `arguments_schema`.
 */
import { Effect } from "effect"
import { AnswerSchemaTooComplex, InvalidRequest } from "../api/Errors.ts"
import type { AnswerSchemas } from "./AnswerSchema.ts"
import { validationBusy } from "./ValidationBusy.ts"

/**
 * Checks `schema` (the request's member `field`), compiled under `key`:
 * 400 `INVALID_REQUEST` when it is not usable JSON Schema, 400
 * `ANSWER_SCHEMA_TOO_COMPLEX` naming the limit it exceeds, 429
 * `VALIDATION_BUSY` when the organization holds its share of the queue.
 */
export const checkSchema = (
  schemas: AnswerSchemas["Service"],
  orgId: string,
  key: string,
  schema: unknown,
  field = "answer_schema"
) =>
  schemas.check(orgId, key, schema, field).pipe(
    Effect.catchTags({
      SchemaUnusable: (unusable) =>
        Effect.fail(new InvalidRequest({ field, detail: `${field} is not a valid JSON Schema: ${unusable.message}` })),
      OverLimit: (over) =>
        Effect.fail(
          new AnswerSchemaTooComplex({
            field: over.field,
            limit: over.limit,
            limit_value: over.value,
            detail: `${over.field} ${over.message} (${over.limit}).`
          })
        ),
      ValidationQueueFull: (full) => Effect.fail(validationBusy(full.value, "schema checks"))
    })
  )
