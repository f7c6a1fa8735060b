/** The checks on a delivery's raw bytes: the body's size, `X-Svc-Signature` and the Standard Webhooks headers. */
import {
  decodeEvent,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_TOLERANCE_SECONDS,
  MAX_SIGNATURE_HEADER_LENGTH,
  MAX_SIGNATURES,
  type RawBody,
  type Secrets,
  type VerifyOptions,
  type WebhookEvent,
  WebhookVerificationError
} from "./events.ts"

const encoder = new TextEncoder()

const bytesOf = (body: RawBody): Uint8Array<ArrayBuffer> => {
  if (typeof body === "string") return encoder.encode(body)
  if (body instanceof ArrayBuffer) return new Uint8Array(body)
  const copy = new Uint8Array(body.byteLength)
  copy.set(body)
  return copy
}

const maxBodyBytesOf = (options: Pick<VerifyOptions, "maxBodyBytes">): number => {
  const max = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
  if (!Number.isSafeInteger(max) || max <= 0) throw new TypeError("maxBodyBytes must be a positive integer")
  return max
}

const tooLarge = (max: number) =>
  new WebhookVerificationError("body_too_large", `the body is over ${max} bytes (maxBodyBytes)`)

/** The body as bytes, refusing one over `max` bytes (a string is measured before it is encoded when it can be). */
const boundedBytesOf = (body: RawBody, max: number): Uint8Array<ArrayBuffer> => {
  // Each UTF-16 unit encodes to at least one UTF-8 byte.
  if (typeof body === "string" && body.length > max) throw tooLarge(max)
  const bytes = bytesOf(body)
  if (bytes.byteLength > max) throw tooLarge(max)
  return bytes
}

/**
 * Reads a request's raw body, at most `maxBodyBytes` (default 1 MiB): a
 * larger `Content-Length` is refused before reading, and a stream is read
 * only until it passes the limit, then cancelled, never to its end. Rejects
 * with `body_too_large`.
 */
export const readRawBody = async (
  request: { readonly headers: Headers; readonly body: ReadableStream<Uint8Array> | null },
  options: Pick<VerifyOptions, "maxBodyBytes"> = {}
): Promise<Uint8Array<ArrayBuffer>> => {
  const max = maxBodyBytesOf(options)
  const declared = request.headers.get("content-length")
  if (declared !== null && /^\d+$/.test(declared.trim()) && Number(declared.trim()) > max) {
    await request.body?.cancel().catch(() => undefined)
    throw tooLarge(max)
  }
  if (request.body === null) return new Uint8Array(0)
  const reader = request.body.getReader()
  const chunks: Array<Uint8Array> = []
  let total = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    total += value.byteLength
    if (total > max) {
      // Cancelling tells the source to stop producing; the failure of the
      // cancellation itself changes nothing for the caller.
      await reader.cancel().catch(() => undefined)
      throw tooLarge(max)
    }
    chunks.push(value)
  }
  const out = new Uint8Array(total)
  let offset = 0
  for (const chunk of chunks) {
    out.set(chunk, offset)
    offset += chunk.byteLength
  }
  return out
}

// The kit runs in the receiver's process, without Effect or any dependency:
// its default clock is the platform's (a caller may pass its own).
const nowMillis = (now: VerifyOptions["now"]): number =>
  now === undefined ? Date.now() : typeof now === "function" ? now() : now instanceof Date ? now.getTime() : now

const hexToBytes = (hex: string): Uint8Array<ArrayBuffer> | undefined => {
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) return undefined
  const out = new Uint8Array(32)
  for (let i = 0; i < 32; i++) out[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16)
  return out
}

export interface ParsedSignatureHeader {
  readonly timestamp: number
  /** The `v1=` values, as given. */
  readonly signatures: ReadonlyArray<string>
}

/**
 * Parses `t=<unix>,v1=<hex>[,v1=<hex>...]`; unknown schemes (`v0=`, ...) are
 * ignored as Stripe does. At most `MAX_SIGNATURE_HEADER_LENGTH` characters
 * and `MAX_SIGNATURES` `v1=` values.
 */
export const parseSignatureHeader = (header: string | null | undefined): ParsedSignatureHeader => {
  if (typeof header !== "string" || header.length === 0) {
    throw new WebhookVerificationError("malformed_header", "missing X-Svc-Signature header")
  }
  if (header.length > MAX_SIGNATURE_HEADER_LENGTH) {
    throw new WebhookVerificationError(
      "malformed_header",
      `the X-Svc-Signature header is over ${MAX_SIGNATURE_HEADER_LENGTH} characters`
    )
  }
  let timestamp: number | undefined
  const signatures: Array<string> = []
  for (const part of header.split(",")) {
    const index = part.indexOf("=")
    if (index <= 0) continue
    const key = part.slice(0, index).trim()
    const value = part.slice(index + 1).trim()
    if (key === "t") {
      if (!/^\d{1,12}$/.test(value)) {
        throw new WebhookVerificationError("malformed_header", "the t= value is not a unix time in seconds")
      }
      timestamp = Number(value)
    } else if (key === "v1") {
      if (signatures.length === MAX_SIGNATURES) {
        throw new WebhookVerificationError(
          "malformed_header",
          `more than ${MAX_SIGNATURES} v1= signatures in X-Svc-Signature`
        )
      }
      signatures.push(value)
    }
  }
  if (timestamp === undefined) throw new WebhookVerificationError("malformed_header", "no t= value in X-Svc-Signature")
  if (signatures.length === 0) {
    throw new WebhookVerificationError("malformed_header", "no v1= signature in X-Svc-Signature")
  }
  return { timestamp, signatures }
}

const importKey = (subtle: SubtleCrypto, secret: string) =>
  subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"])

/**
 * Equality of two digests in time that depends on their length only. Web
 * Crypto has no timing-safe comparison, and `subtle.verify` would compute
 * the HMAC again for every `v1=` value, which is what this avoids.
 */
const digestsEqual = (a: Uint8Array, b: Uint8Array): boolean => {
  if (a.byteLength !== b.byteLength) return false
  let difference = 0
  for (let i = 0; i < a.byteLength; i++) difference |= a[i]! ^ b[i]!
  return difference === 0
}

/**
 * Checks the signature and the timestamp of a delivery, on the raw body,
 * without parsing it. Resolves to the verified timestamp; rejects with a
 * `WebhookVerificationError` (`malformed_header`, `body_too_large`,
 * `bad_signature`, `timestamp_outside_tolerance`). One HMAC per secret,
 * however many `v1=` values the header holds.
 */
export const verifySignature = async (
  rawBody: RawBody,
  signatureHeader: string | null | undefined,
  secret: Secrets,
  options: VerifyOptions = {}
): Promise<{ readonly timestamp: number }> => {
  const parsed = parseSignatureHeader(signatureHeader)
  const secrets = typeof secret === "string" ? [secret] : [...secret]
  if (secrets.length === 0 || secrets.some((s) => typeof s !== "string" || s.length === 0)) {
    throw new TypeError("verifySignature: the signing secret is empty")
  }
  const body = boundedBytesOf(rawBody, maxBodyBytesOf(options))
  const subtle = options.subtle ?? globalThis.crypto.subtle
  const prefix = encoder.encode(`${parsed.timestamp}.`)
  const signed = new Uint8Array(prefix.length + body.length)
  signed.set(prefix)
  signed.set(body, prefix.length)
  const candidates = parsed.signatures.map(hexToBytes)
  let matched = false
  for (const value of new Set(secrets)) {
    const digest = new Uint8Array(await subtle.sign("HMAC", await importKey(subtle, value), signed))
    // Every candidate is compared so the time taken does not say which one matched.
    for (const candidate of candidates) {
      if (candidate !== undefined && digestsEqual(digest, candidate)) matched = true
    }
  }
  if (!matched) throw new WebhookVerificationError("bad_signature", "no v1= signature matches the signing secret")
  checkTolerance(parsed.timestamp, options)
  return { timestamp: parsed.timestamp }
}

// ---------------------------------------------------------------------------
// Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature)

/** The three Standard Webhooks headers of a delivery. */
export interface StandardWebhookHeaders {
  readonly "webhook-id": string | null | undefined
  readonly "webhook-timestamp": string | null | undefined
  readonly "webhook-signature": string | null | undefined
}

/** Headers as a `Headers` object, Node's `IncomingHttpHeaders`, or a plain lower-case record. */
export type HeaderSource =
  | { readonly get: (name: string) => string | null }
  | Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

const headerOf = (headers: HeaderSource, name: string): string | undefined => {
  if (typeof (headers as { get?: unknown }).get === "function") {
    return (headers as { get: (name: string) => string | null }).get(name) ?? undefined
  }
  const record = headers as Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  const value = record[name] ?? Object.entries(record).find(([key]) => key.toLowerCase() === name)?.[1]
  return Array.isArray(value) ? value.join(", ") : value as string | undefined
}

/**
 * The HMAC key of a secret under Standard Webhooks: the bytes its part after
 * `whsec_` decodes to. Secrets are standard base64 (with padding); secrets
 * made before were base64url, decoded as such.
 */
export const standardKeyBytes = (secret: string): Uint8Array<ArrayBuffer> => {
  const encoded = (secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret)
    .replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "")
  if (!/^[A-Za-z0-9+/]*$/.test(encoded) || encoded.length % 4 === 1) {
    throw new TypeError("the signing secret is not whsec_ followed by base64")
  }
  const binary = atob(encoded + "=".repeat((4 - (encoded.length % 4)) % 4))
  const out = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i)
  return out
}

const base64ToBytes = (value: string): Uint8Array<ArrayBuffer> | undefined => {
  // A SHA-256 digest: 44 characters of standard base64 with one `=`.
  if (!/^[A-Za-z0-9+/]{43}=$/.test(value)) return undefined
  const binary = atob(value)
  const out = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i)
  return out
}

/**
 * Checks a delivery's Standard Webhooks signature (`webhook-signature:
 * v1,<base64> ...` over `${webhook-id}.${webhook-timestamp}.${rawBody}`) and
 * timestamp, on the raw body. Same limits and reasons as `verifySignature`:
 * one HMAC per secret, at most `MAX_SIGNATURES` entries and
 * `MAX_SIGNATURE_HEADER_LENGTH` characters. Resolves to the id and timestamp.
 */
export const verifyStandardWebhook = async (
  rawBody: RawBody,
  headers: StandardWebhookHeaders | HeaderSource,
  secret: Secrets,
  options: VerifyOptions = {}
): Promise<{ readonly id: string; readonly timestamp: number }> => {
  const source = headers as HeaderSource
  const id = headerOf(source, "webhook-id")
  const stamp = headerOf(source, "webhook-timestamp")
  const signature = headerOf(source, "webhook-signature")
  if (typeof id !== "string" || id.length === 0 || id.length > 256 || id.includes(".")) {
    throw new WebhookVerificationError("malformed_header", "missing or malformed webhook-id header")
  }
  if (typeof stamp !== "string" || !/^\d{1,12}$/.test(stamp)) {
    throw new WebhookVerificationError(
      "malformed_header",
      "missing webhook-timestamp header, or not a unix time in seconds"
    )
  }
  if (typeof signature !== "string" || signature.length === 0) {
    throw new WebhookVerificationError("malformed_header", "missing webhook-signature header")
  }
  if (signature.length > MAX_SIGNATURE_HEADER_LENGTH) {
    throw new WebhookVerificationError(
      "malformed_header",
      `the webhook-signature header is over ${MAX_SIGNATURE_HEADER_LENGTH} characters`
    )
  }
  const entries = signature.split(" ").filter((entry) => entry.length > 0)
  const values = entries.filter((entry) => entry.startsWith("v1,")).map((entry) => entry.slice(3))
  if (values.length === 0) {
    throw new WebhookVerificationError("malformed_header", "no v1, signature in webhook-signature")
  }
  if (values.length > MAX_SIGNATURES) {
    throw new WebhookVerificationError(
      "malformed_header",
      `more than ${MAX_SIGNATURES} v1, signatures in webhook-signature`
    )
  }
  const secrets = typeof secret === "string" ? [secret] : [...secret]
  if (secrets.length === 0 || secrets.some((s) => typeof s !== "string" || s.length === 0)) {
    throw new TypeError("verifyStandardWebhook: the signing secret is empty")
  }
  const body = boundedBytesOf(rawBody, maxBodyBytesOf(options))
  const subtle = options.subtle ?? globalThis.crypto.subtle
  const prefix = encoder.encode(`${id}.${stamp}.`)
  const signed = new Uint8Array(prefix.length + body.length)
  signed.set(prefix)
  signed.set(body, prefix.length)
  const candidates = values.map(base64ToBytes)
  let matched = false
  for (const value of new Set(secrets)) {
    const key = await subtle.importKey("raw", standardKeyBytes(value), { name: "HMAC", hash: "SHA-256" }, false, [
      "sign"
    ])
    const digest = new Uint8Array(await subtle.sign("HMAC", key, signed))
    for (const candidate of candidates) {
      if (candidate !== undefined && digestsEqual(digest, candidate)) matched = true
    }
  }
  if (!matched) {
    throw new WebhookVerificationError(
      "bad_signature",
      "no v1, signature in webhook-signature matches the signing secret"
    )
  }
  const timestamp = Number(stamp)
  checkTolerance(timestamp, options)
  return { id, timestamp }
}

const checkTolerance = (timestamp: number, options: VerifyOptions) => {
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS
  const skew = Math.abs(nowMillis(options.now) / 1000 - timestamp)
  if (tolerance > 0 && skew > tolerance) {
    throw new WebhookVerificationError(
      "timestamp_outside_tolerance",
      `the signature timestamp is ${Math.round(skew)} s away from this receiver's clock (tolerance ${tolerance} s)`
    )
  }
}

/**
 * Verifies a delivery by its headers, whichever scheme they carry:
 * `X-Svc-Signature` when present, otherwise the Standard Webhooks headers
 * (then the body's `id` must equal `webhook-id`). Resolves to the verified,
 * decoded event; rejects with a `WebhookVerificationError` saying why.
 */
export const constructEventFromHeaders = async (
  rawBody: RawBody,
  headers: HeaderSource,
  secret: Secrets,
  options: VerifyOptions = {}
): Promise<WebhookEvent> => {
  const svc = headerOf(headers, "x-svc-signature")
  if (svc !== undefined && svc.length > 0) return constructEvent(rawBody, svc, secret, options)
  const { id } = await verifyStandardWebhook(rawBody, headers, secret, options)
  const event = decodeEvent(rawBody, options)
  if (event.id !== id) throw new WebhookVerificationError("invalid_body", "the event id is not the webhook-id header")
  return event
}

/** Refuses malformed signature headers before the body is read (either scheme). */
export const checkHeadersBeforeBody = (headers: HeaderSource) => {
  const svc = headerOf(headers, "x-svc-signature")
  if (svc !== undefined && svc.length > 0) {
    parseSignatureHeader(svc)
    return
  }
  const signature = headerOf(headers, "webhook-signature")
  if (
    signature === undefined || headerOf(headers, "webhook-id") === undefined ||
    headerOf(headers, "webhook-timestamp") === undefined
  ) {
    throw new WebhookVerificationError(
      "malformed_header",
      "missing X-Svc-Signature header (or the webhook-id, webhook-timestamp and webhook-signature headers)"
    )
  }
  if (signature.length > MAX_SIGNATURE_HEADER_LENGTH) {
    throw new WebhookVerificationError(
      "malformed_header",
      `the webhook-signature header is over ${MAX_SIGNATURE_HEADER_LENGTH} characters`
    )
  }
}

/**
 * Verifies the signature on the raw body, then decodes and validates the
 * event. Resolves to the event or rejects with a `WebhookVerificationError`
 * saying why.
 */
export const constructEvent = async (
  rawBody: RawBody,
  signatureHeader: string | null | undefined,
  secret: Secrets,
  options: VerifyOptions = {}
): Promise<WebhookEvent> => {
  await verifySignature(rawBody, signatureHeader, secret, options)
  return decodeEvent(rawBody, options)
}
