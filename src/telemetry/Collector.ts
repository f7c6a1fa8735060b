/**
 * One export to a collector: the request (OTLP/HTTP JSON or protobuf,
 * gzipped or not, as the destination says, with its headers) and what its
 * answer means. Shared by the test endpoint, the export worker and replay:
 * a batch is kept as gzipped OTLP/JSON and written in the destination's
 * encoding when it is sent.
 *
 * Retried: 429, 502, 503, 504 and network failures (the OTLP/HTTP
 * specification's retryable set), honouring `Retry-After`. Everything else
 * fails the batch at once (400, 401, 403, 404, 413, 500, a redirect, a TLS
 * failure, a refused target).
 */
import { Clock, Duration, Effect, Redacted } from "effect"
import { constants as zlibConstants, gunzip, gzip, gzipSync } from "node:zlib"
import { readExportAnswer } from "../otlp/Encoding.ts"
import { protobufFromJsonBody } from "../otlp/Protobuf.ts"
import { type OutboundFailure, OutboundHttp, type OutboundResponse } from "../outbound/OutboundHttp.ts"
import { parseRetryAfter as parseHttpRetryAfter } from "../outbound/RetryAfter.ts"
import { fromOutside, urlNeedles, valueNeedles } from "../secrets/Masking.ts"
import type { SpanBatch } from "./Buffers.ts"

/** Longest `Retry-After` we honour; a longer one waits this long. */
export const MAX_RETRY_AFTER = Duration.minutes(5)

export const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504])

export interface CollectorTarget {
  readonly url: string
  readonly headers: ReadonlyArray<readonly [name: string, value: Redacted.Redacted<string>]>
  /** The owning organization (its DNS lookups are bounded together). */
  readonly orgId?: string | undefined
  /** OTLP/HTTP encoding; `http/json` when absent. */
  readonly protocol?: "http/json" | "http/protobuf" | undefined
  /** Body compression; `none` when absent. */
  readonly compression?: "none" | "gzip" | undefined
}

/** A batch as stored: gzipped OTLP JSON, plus its uncompressed size. */
export interface StoredBody {
  readonly gzipped: Uint8Array
  readonly bytes: number
}

export const compress = (json: string): StoredBody => {
  const raw = Buffer.from(json, "utf8")
  return { gzipped: new Uint8Array(gzipSync(raw)), bytes: raw.length }
}

/**
 * A batch's request body (written span by span as they were captured, see
 * `SpanBuffers`) gzipped on libuv's thread pool, after which its buffer is
 * given back for a later batch. Gzip's fastest level: on a batch of 512
 * spans it takes under half the time of the default level for a body about
 * 10 % larger (span ids are random hex), and that time is a core the
 * requests share.
 */
export const compressBatch = (batch: SpanBatch): Effect.Effect<StoredBody> =>
  Effect.callback<StoredBody>((resume) => {
    const bytes = batch.body.length
    gzip(batch.body, { level: zlibConstants.Z_BEST_SPEED }, (error, out) => {
      batch.release()
      resume(error === null ? Effect.succeed({ gzipped: out, bytes }) : Effect.die(error))
    })
  })

export type ExportResult =
  | { readonly _tag: "Accepted"; readonly status: number; readonly warning: string | undefined }
  | { readonly _tag: "Partial"; readonly status: number; readonly rejected: number; readonly error: string }
  | {
    readonly _tag: "Retryable"
    readonly status: number | undefined
    readonly retryAfter: Duration.Duration | undefined
    readonly error: string
  }
  | { readonly _tag: "Rejected"; readonly status: number | undefined; readonly error: string }

/** `Retry-After` (see `outbound/RetryAfter.ts`), capped at `MAX_RETRY_AFTER`; `undefined` when absent or unreadable. */
export const parseRetryAfter = (value: string | undefined, now: number): Duration.Duration | undefined => {
  const millis = parseHttpRetryAfter(value, now)
  return millis === undefined ? undefined : Duration.millis(Math.min(millis, Duration.toMillis(MAX_RETRY_AFTER)))
}

/**
 * Collector-provided text (a `partialSuccess.errorMessage`) cut to
 * `MAX_OUTSIDE_TEXT`, with what svc protects masked (`fromOutside`) in
 * case a collector echoes what it was sent: each header value, the
 * credential of an `Authorization`-style value alone (`Bearer <token>`
 * echoed as `<token>`), and the parts of the collector URL that may carry a
 * credential.
 */
export const scrub = (text: string, target: CollectorTarget): string =>
  fromOutside(text, [
    ...target.headers.flatMap(([, value]) => valueNeedles(Redacted.value(value))),
    ...urlNeedles(target.url)
  ])

/**
 * What an answer means. `clean` masks secrets in the collector's message;
 * it runs before the message is cut short, so a cut never leaves part of a
 * secret behind.
 */
export const classify = (
  response: OutboundResponse,
  spanCount: number,
  now: number,
  clean: (text: string) => string = (text) => text
): ExportResult => {
  const status = response.status
  if (status >= 200 && status < 300) {
    const answer = readExportAnswer(response.body, response.headers["content-type"])
    const message = answer.errorMessage === undefined ? undefined : clean(answer.errorMessage)
    if (answer.rejectedSpans > 0) {
      return {
        _tag: "Partial",
        status,
        rejected: answer.rejectedSpans,
        error: `collector rejected ${answer.rejectedSpans} of ${spanCount} spans${
          message === undefined ? "" : `: ${message.slice(0, 200)}`
        }`
      }
    }
    return { _tag: "Accepted", status, warning: message?.slice(0, 500) }
  }
  if (RETRYABLE_STATUSES.has(status)) {
    return {
      _tag: "Retryable",
      status,
      retryAfter: parseRetryAfter(response.headers["retry-after"], now),
      error: `collector answered ${status}`
    }
  }
  return { _tag: "Rejected", status, error: `collector answered ${status}` }
}

export const classifyFailure = (failure: OutboundFailure): ExportResult =>
  failure.reason === "network" || failure.reason === "timeout"
    ? {
      _tag: "Retryable",
      status: undefined,
      retryAfter: undefined,
      error: `collector unreachable: ${failure.message}`
    }
    : { _tag: "Rejected", status: undefined, error: `collector refused: ${failure.message}` }

const gunzipAsync = (bytes: Uint8Array): Effect.Effect<Uint8Array> =>
  Effect.callback<Uint8Array>((resume) => {
    gunzip(bytes, (error, out) => resume(error === null ? Effect.succeed(new Uint8Array(out)) : Effect.die(error)))
  })

const gzipAsync = (bytes: Uint8Array): Effect.Effect<Uint8Array> =>
  Effect.callback<Uint8Array>((resume) => {
    gzip(bytes, { level: zlibConstants.Z_BEST_SPEED }, (error, out) =>
      resume(error === null ? Effect.succeed(new Uint8Array(out)) : Effect.die(error)))
  })

/**
 * The request body and its headers in the target's encoding, from a batch
 * kept as gzipped OTLP/JSON: JSON gzipped is the batch as kept; protobuf is
 * written from the JSON (`otlp/Protobuf.ts`) and gzipped again if asked.
 */
export const requestBody = (
  target: Pick<CollectorTarget, "protocol" | "compression">,
  body: StoredBody
): Effect.Effect<{ readonly bytes: Uint8Array; readonly contentType: string; readonly gzip: boolean }> =>
  Effect.gen(function*() {
    const gzipped = target.compression === "gzip"
    if (target.protocol !== "http/protobuf") {
      return {
        bytes: gzipped ? body.gzipped : yield* gunzipAsync(body.gzipped),
        contentType: "application/json",
        gzip: gzipped
      }
    }
    const proto = protobufFromJsonBody(yield* gunzipAsync(body.gzipped))
    return { bytes: gzipped ? yield* gzipAsync(proto) : proto, contentType: "application/x-protobuf", gzip: gzipped }
  })

/** POSTs one OTLP/HTTP body and says what the answer means. Never fails. */
export const exportBody = Effect.fn("Collector.exportBody")(function*(
  target: CollectorTarget,
  body: StoredBody,
  spanCount: number,
  /** `SVC_TELEMETRY_EXPORT_TIMEOUT` */
  timeout: Duration.Duration
) {
  const http = yield* OutboundHttp
  const request = yield* requestBody(target, body)
  // Header names are the tenant's: a map without a prototype, so a header
  // named `__proto__` is a header like any other, not a prototype change.
  const headers: Record<string, string> = Object.create(null)
  for (const [name, value] of target.headers) headers[name] = Redacted.value(value)
  headers["content-type"] = request.contentType
  if (request.gzip) headers["content-encoding"] = "gzip"
  const started = performance.now()
  const result = yield* http.send({
    url: target.url,
    method: "POST",
    headers,
    body: request.bytes,
    timeout,
    maxResponseBytes: 16 * 1024,
    orgId: target.orgId
  }).pipe(
    Effect.flatMap((response) =>
      Effect.map(
        Clock.currentTimeMillis,
        (now) => ({ result: classify(response, spanCount, now, (text) => scrub(text, target)), response })
      )
    ),
    Effect.catchTag(
      "OutboundFailure",
      (failure) => Effect.succeed({ result: classifyFailure(failure), response: undefined })
    )
  )
  return { ...result, durationMs: performance.now() - started }
})
