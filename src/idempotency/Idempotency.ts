/**
 * The server side of `Idempotency` (`src/api/Idempotency.ts`): a write that
 * carries `Idempotency-Key` reserves the key in the database before it runs
 * and records its answer after, so a repeat, in this process or another
 * sharing the database, answers what the first answered instead of acting
 * again.
 *
 * - Reserve: a row per organization and key (`Keys.ts`), `running`, with a
 *   lease of `LEASE_SECONDS` that the request's process renews while the
 *   request runs. The row's fingerprint is the method, the path with its
 *   query and the SHA-256 of the body.
 * - Record: a 2xx or 4xx answer (status, content type and body sealed with
 *   the master key) once the handler answered; the key is then `done`.
 *   A 5xx, a 429 and a request refused before the handler ran (a body that
 *   does not decode) are not kept: the key is released and may be retried.
 * - Repeat: the same fingerprint answers the kept answer with
 *   `Idempotent-Replayed: true`; another fingerprint is `422
 *   IDEMPOTENCY_KEY_REUSED`; a key still running (its lease renewed) is `409
 *   IDEMPOTENCY_KEY_IN_USE`; a key whose request began but whose answer
 *   was never recorded (its process stopped between the change and the
 *   record, or the answer was too large to keep) is `409
 *   IDEMPOTENCY_ANSWER_UNAVAILABLE`, and is never run again: what it did
 *   is unknown to svc, so it must not guess (docs/api.md, "Idempotent
 *   writes").
 *
 * The handlers keep their own transactions: running each keyed request in
 * one transaction with its record would hold a connection (on the embedded
 * database, the whole database) over its work outside the database (schema
 * checks in workers, DNS, test deliveries) and deadlock with work other
 * fibers do for it.
 */
import { PgClient } from "@effect/sql-pg"
import { Cause, Context, Duration, Effect, Exit, Layer, Redacted, Schedule, Schema } from "effect"
import { HttpServerRequest, HttpServerRespondable, HttpServerResponse } from "effect/http"
import { InvalidRequest, RateLimited } from "../api/Errors.ts"
import {
  Idempotency,
  IDEMPOTENCY_HEADER,
  IdempotencyAnswerUnavailable,
  IdempotencyDetails,
  IdempotencyKey,
  IdempotencyKeyInUse,
  IdempotencyKeyReused,
  MAX_KEY_LENGTH,
  REPLAYED_HEADER
} from "../api/Idempotency.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { SvcConfig } from "../platform/Config.ts"
import { SecretBox } from "../platform/Crypto.ts"
import { sha256Hex } from "../platform/Digest.ts"
import { responseHeader } from "../platform/ResponseHeader.ts"
import * as Keys from "./Keys.ts"

/** How long a running request holds its key without renewing it; renewed every `RENEW_EVERY`. */
const LEASE_SECONDS = 10
const RENEW_EVERY = "3 seconds"

const HEADER = IDEMPOTENCY_HEADER.toLowerCase()
const isKey = Schema.is(IdempotencyKey)
const KEY_RULE = `1 to ${MAX_KEY_LENGTH} printable ASCII characters without spaces`

/** The seal's context: a kept answer opens only as the answer of its own organization's key. */
const sealContext = (r: Keys.Reservation) => `idempotency:${r.orgId}:${r.key}`

/** The problem and status of a failed handler when its answer is kept (a 4xx other than 429), else undefined. */
const keptFailure = (cause: Cause.Cause<unknown>): unknown => {
  const error = Cause.findErrorOption(cause)
  if (error._tag === "None" || !HttpServerRespondable.isRespondable(error.value)) return undefined
  const status = (error.value as { readonly status?: unknown }).status
  return typeof status === "number" && status >= 400 && status < 500 && status !== 429 ? error.value : undefined
}

const bodyOf = (response: HttpServerResponse.HttpServerResponse): Uint8Array | undefined =>
  response.body._tag === "Uint8Array"
    ? response.body.body
    : response.body._tag === "Empty"
    ? new Uint8Array()
    : undefined

export const IdempotencyLive = Layer.effect(
  Idempotency,
  Effect.gen(function*() {
    const sql = yield* PgClient.PgClient
    const box = yield* SecretBox
    const { idempotency: settings } = yield* SvcConfig
    const ttlSeconds = Math.ceil(Duration.toMillis(settings.ttl) / 1000)

    const record = (r: Keys.Reservation, response: HttpServerResponse.HttpServerResponse) => {
      const body = bodyOf(response)
      const kept = body !== undefined && body.byteLength <= settings.maxAnswerBytes
      const text = kept && body.byteLength > 0 ? new TextDecoder().decode(body) : undefined
      return Keys.complete(sql, r, {
        status: response.status,
        contentType: response.body._tag === "Uint8Array" ? response.body.contentType : null,
        sealed: text === undefined ? null : box.seal(text, sealContext(r)),
        kept
      })
    }

    /** The first request with the key: run it while its lease is renewed, then record or release. */
    const runFirst = (
      r: Keys.Reservation,
      httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, unknown>
    ) =>
      Effect.scoped(Effect.gen(function*() {
        yield* Effect.forkScoped(
          Keys.renew(sql, r, LEASE_SECONDS).pipe(Effect.repeat(Schedule.spaced(RENEW_EVERY)), Effect.delay(RENEW_EVERY))
        )
        return yield* Effect.exit(httpEffect)
      })).pipe(
        Effect.flatMap((exit) => {
          const failure = Exit.isFailure(exit) ? keptFailure(exit.cause) : undefined
          const after = Exit.isSuccess(exit)
            ? exit.value.status < 500 ? record(r, exit.value) : Keys.release(sql, r)
            : failure === undefined
            ? Keys.release(sql, r)
            : Effect.flatMap(
              HttpServerRespondable.toResponse(failure as HttpServerRespondable.Respondable),
              (response) => record(r, response)
            )
          return Effect.andThen(after, exit)
        })
      )

    /** A repeat: the kept answer, or why there is none. */
    const repeat = (r: Keys.Reservation, row: Keys.KeyRow) =>
      Effect.gen(function*() {
        if (row.fingerprint !== r.fingerprint) {
          return yield* new IdempotencyKeyReused({
            field: IDEMPOTENCY_HEADER,
            detail: IdempotencyDetails.reused
          })
        }
        if (row.state === "running") {
          return yield* row.leased
            ? new IdempotencyKeyInUse({
              field: IDEMPOTENCY_HEADER,
              detail: IdempotencyDetails.inUse
            })
            : new IdempotencyAnswerUnavailable({
              field: IDEMPOTENCY_HEADER,
              detail: IdempotencyDetails.interrupted
            })
        }
        if (!row.kept || row.status === null) {
          return yield* new IdempotencyAnswerUnavailable({
            field: IDEMPOTENCY_HEADER,
            detail: `The first request with this key answered ${
              row.status ?? "?"
            }, with a body larger than SVC_IDEMPOTENCY_MAX_ANSWER_BYTES (${settings.maxAnswerBytes} bytes), which was not kept. It is not run again under this key.`
          })
        }
        const body = row.answer === null
          ? new Uint8Array()
          : new TextEncoder().encode(Redacted.value(yield* Effect.orDie(box.open(row.answer, sealContext(r)))))
        return HttpServerResponse.uint8Array(body, {
          status: row.status,
          ...(row.content_type === null ? {} : { contentType: row.content_type }),
          headers: { [REPLAYED_HEADER.toLowerCase()]: "true" }
        })
      })

    const keyed = (
      raw: string,
      request: HttpServerRequest.HttpServerRequest,
      httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, unknown>
    ) =>
      Effect.gen(function*() {
        if (!isKey(raw)) {
          return yield* new InvalidRequest({
            field: IDEMPOTENCY_HEADER,
            detail: `${IDEMPOTENCY_HEADER}: expected ${KEY_RULE}`,
            errors: [{ field: IDEMPOTENCY_HEADER, message: `Expected ${KEY_RULE}` }]
          })
        }
        const principal = yield* CurrentPrincipal
        const body = yield* Effect.orDie(request.arrayBuffer)
        // The body's bytes as latin1: one character per byte, so any body has one digest.
        const bodyDigest = sha256Hex(Buffer.from(body).toString("latin1"))
        const fingerprint = sha256Hex(`${request.method} ${request.url}\n${bodyDigest}`)
        const r: Keys.Reservation = { orgId: principal.orgId, key: raw, fingerprint }
        const reserved = Keys.reserve(sql, r, {
          ttlSeconds,
          leaseSeconds: LEASE_SECONDS,
          maxKeys: settings.maxKeysPerOrg
        })
        // Uninterruptible: a client that gives up (a timeout) must not leave
        // a change made and its key released; the retry it sends gets the answer.
        if (yield* Effect.orDie(reserved)) return yield* Effect.uninterruptible(runFirst(r, httpEffect))
        const row = yield* Keys.read(sql, r.orgId, r.key)
        if (row !== undefined) return yield* repeat(r, row)
        const seconds = yield* Keys.secondsUntilOldestExpires(sql, r.orgId)
        yield* responseHeader("retry-after", String(seconds))
        return yield* new RateLimited({
          limit: "SVC_IDEMPOTENCY_MAX_KEYS_PER_ORG",
          limit_value: settings.maxKeysPerOrg,
          retry_after_seconds: seconds,
          detail:
            `The organization holds ${settings.maxKeysPerOrg} idempotency keys, the most allowed (SVC_IDEMPOTENCY_MAX_KEYS_PER_ORG); the oldest expires in ${seconds} s. Send the request without the header, or retry then.`
        })
      })

    return Idempotency.of((httpEffect) =>
      Effect.withFiber((fiber) => {
        const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
        const raw = request.headers[HEADER]
        return raw === undefined ? httpEffect : keyed(raw, request, httpEffect)
      }) as any
    )
  })
)
