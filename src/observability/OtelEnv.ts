/**
 * The standard OpenTelemetry SDK environment variables that turn on the
 * export of the service's own traces, parsed as the OpenTelemetry
 * specification defines them ("SDK environment variables" and "OTLP
 * exporter configuration"):
 *
 * - on when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is) or
 *   `OTEL_EXPORTER_OTLP_ENDPOINT` (the base: `v1/traces` is appended) is set,
 *   unless `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`;
 * - `OTEL_EXPORTER_OTLP[_TRACES]_HEADERS`: `key=value` pairs separated by
 *   commas, values percent-encoded (W3C Baggage without properties);
 *   `_TIMEOUT` (ms, default 10000); `_COMPRESSION` (`gzip` or `none`);
 *   `_CERTIFICATE` (a PEM file trusted for the collector's TLS);
 *   `_PROTOCOL`: only `http/json` (svc writes OTLP/HTTP JSON; it is also the
 *   default here, where OpenTelemetry's specification has `http/protobuf`);
 *   the signal-specific variable wins over the general one;
 * - `OTEL_SERVICE_NAME` (default `svc`), `OTEL_RESOURCE_ATTRIBUTES`
 *   (`key=value` pairs, percent-encoded values; `OTEL_SERVICE_NAME` wins
 *   over a `service.name` there);
 * - `OTEL_TRACES_SAMPLER` (`always_on`, `always_off`, `traceidratio`,
 *   `parentbased_always_on` (default), `parentbased_always_off`,
 *   `parentbased_traceidratio`) with `OTEL_TRACES_SAMPLER_ARG` (the ratio,
 *   0 to 1, default 1);
 * - `SVC_OPERATOR_TRACE_PARENT_RATE` (svc's own, default 10): traces per
 *   second a caller's sampled `traceparent` may add to what the parent-based
 *   sampler would keep of a new trace (a caller's unsampled flag is always
 *   followed); 0 ignores callers' sampled flags entirely;
 * - `OTEL_BSP_SCHEDULE_DELAY` (5000 ms), `OTEL_BSP_EXPORT_TIMEOUT`
 *   (30000 ms), `OTEL_BSP_MAX_QUEUE_SIZE` (2048), `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`
 *   (512).
 *
 * An empty value counts as unset, as OpenTelemetry's specification says. Where it
 * lets an SDK warn and fall back to a default for a value it cannot read,
 * svc refuses to start instead, naming the variable: an operator who asked
 * for something gets it or hears why not. Unsupported choices (another
 * protocol, exporter or sampler; client certificates) are refused the same
 * way.
 */
import * as fs from "node:fs"
import { maskSettingText } from "../platform/SettingText.ts"

const SAMPLERS = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio"
] as const
export type SamplerName = typeof SAMPLERS[number]

export interface OperatorSampler {
  readonly name: SamplerName
  /** The ratio of `*traceidratio`; 1 for the others. */
  readonly ratio: number
}

export interface OperatorTraceSettings {
  /** The full OTLP/HTTP traces URL. */
  readonly url: string
  /** Header names lower-cased; values are secrets (never logged). */
  readonly headers: ReadonlyArray<readonly [name: string, value: string]>
  readonly timeoutMs: number
  readonly gzip: boolean
  /** PEM text trusted for the collector's TLS, beside the system store. */
  readonly ca: string | undefined
  readonly resource: ReadonlyArray<readonly [key: string, value: string]>
  readonly sampler: OperatorSampler
  /** Traces per second callers' sampled `traceparent`s may add beyond the sampler's own choice (`SVC_OPERATOR_TRACE_PARENT_RATE`). */
  readonly callerSampledPerSecond: number
  readonly scheduleDelayMs: number
  readonly exportTimeoutMs: number
  readonly maxQueueSize: number
  readonly maxExportBatchSize: number
}

/** Traces per second a caller's sampled flag may add, by default: enough to follow a few requests end to end, far below any queue. */
export const DEFAULT_CALLER_SAMPLED_PER_SECOND = 10

export type Env = Readonly<Record<string, string | undefined>>

export class OtelEnvError extends Error {
  override readonly name = "OtelEnvError"
}

const fail = (message: string): never => {
  throw new OtelEnvError(message)
}

const read = (env: Env, name: string): string | undefined => {
  const value = env[name]?.trim()
  return value === undefined || value === "" ? undefined : value
}

/** The signal-specific variable, else the general one. */
const either = (env: Env, suffix: string): { readonly name: string; readonly value: string } | undefined => {
  for (const name of [`OTEL_EXPORTER_OTLP_TRACES_${suffix}`, `OTEL_EXPORTER_OTLP_${suffix}`]) {
    const value = read(env, name)
    if (value !== undefined) return { name, value }
  }
  return undefined
}

const decode = (name: string, text: string): string => {
  try {
    return decodeURIComponent(text)
  } catch {
    // The text may be a header's value (a token): named, never quoted.
    return fail(`${name}: a member is not valid percent-encoding`)
  }
}

// RFC 7230 token characters: what a header name may be.
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

/**
 * `key1=value1,key2=value2` (W3C Baggage members without properties):
 * whitespace around members, keys and values is trimmed, values are
 * percent-decoded. A member without `=` or with an empty key is an error.
 */
export const parseKeyValues = (name: string, raw: string): ReadonlyArray<readonly [string, string]> => {
  const out: Array<readonly [string, string]> = []
  for (const member of raw.split(",")) {
    if (member.trim() === "") continue
    const at = member.indexOf("=")
    if (at <= 0) fail(`${name}: a member is not key=value`)
    const key = decode(name, member.slice(0, at).trim())
    if (key === "") fail(`${name}: a member has an empty key`)
    out.push([key, decode(name, member.slice(at + 1).trim())])
  }
  return out
}

const integer = (env: Env, name: string, fallback: number, min: number): number => {
  const raw = read(env, name)
  if (raw === undefined) return fallback
  if (!/^\d+$/.test(raw)) return fail(`${name}: "${raw}" is not a whole number`)
  const value = Number(raw)
  return value >= min && Number.isSafeInteger(value) ? value : fail(`${name} must be at least ${min}`)
}

const parseSampler = (env: Env): OperatorSampler => {
  const name = (read(env, "OTEL_TRACES_SAMPLER") ?? "parentbased_always_on").toLowerCase()
  if (!(SAMPLERS as ReadonlyArray<string>).includes(name)) {
    return fail(
      `OTEL_TRACES_SAMPLER: "${name}" is not supported; use always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio`
    )
  }
  if (!name.endsWith("traceidratio")) return { name: name as SamplerName, ratio: 1 }
  const arg = read(env, "OTEL_TRACES_SAMPLER_ARG")
  if (arg === undefined) return { name: name as SamplerName, ratio: 1 }
  const ratio = /^(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/.test(arg) ? Number(arg) : Number.NaN
  if (!(ratio >= 0 && ratio <= 1)) fail(`OTEL_TRACES_SAMPLER_ARG: "${arg}" is not a ratio between 0 and 1`)
  return { name: name as SamplerName, ratio }
}

/** The traces URL: the signal-specific endpoint as is, or the base with `v1/traces` appended. */
const tracesUrl = (env: Env): { readonly name: string; readonly url: string } | undefined => {
  const specific = read(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
  const base = read(env, "OTEL_EXPORTER_OTLP_ENDPOINT")
  const name = specific !== undefined ? "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" : "OTEL_EXPORTER_OTLP_ENDPOINT"
  const raw = specific ?? base
  if (raw === undefined) return undefined
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return fail(`${name}: "${maskSettingText(raw)}" is not a URL`)
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") fail(`${name} must be an http:// or https:// URL`)
  if (url.username !== "" || url.password !== "") {
    fail(`${name} must not carry credentials; use OTEL_EXPORTER_OTLP_HEADERS`)
  }
  if (specific === undefined) {
    url.pathname = url.pathname.endsWith("/")
      ? `${url.pathname}v1/traces`
      : `${url.pathname}/v1/traces`
  }
  return { name, url: url.toString() }
}

/**
 * The settings, or `undefined` when the service's own traces are off.
 * Throws `OtelEnvError` naming the variable at fault. `readFile` reads a
 * certificate file (tests pass their own).
 */
export const parseOtelEnv = (
  env: Env,
  readFile: (path: string) => string = (path) => fs.readFileSync(path, "utf8")
): OperatorTraceSettings | undefined => {
  const disabled = read(env, "OTEL_SDK_DISABLED")
  if (disabled?.toLowerCase() === "true") return undefined
  const exporter = read(env, "OTEL_TRACES_EXPORTER")?.toLowerCase()
  if (exporter === "none") return undefined
  const endpoint = tracesUrl(env)
  if (endpoint === undefined) return undefined
  if (exporter !== undefined && exporter !== "otlp") {
    fail(`OTEL_TRACES_EXPORTER: "${exporter}" is not supported; svc exports traces with otlp (or none)`)
  }

  const protocol = either(env, "PROTOCOL")
  if (protocol !== undefined && protocol.value !== "http/json") {
    fail(
      `${protocol.name}: "${protocol.value}" is not supported; svc exports OTLP/HTTP JSON: set it to http/json (or leave it unset)`
    )
  }
  for (const unsupported of ["CLIENT_CERTIFICATE", "CLIENT_KEY"]) {
    const set = either(env, unsupported)
    if (set !== undefined) fail(`${set.name} is not supported (no client certificates for the operator's collector)`)
  }

  const headersVar = either(env, "HEADERS")
  const headers = headersVar === undefined ?
    [] :
    parseKeyValues(headersVar.name, headersVar.value).map(([key, value]) => {
      if (!TOKEN.test(key)) fail(`${headersVar.name}: "${key}" is not a header name`)
      // The value is a secret: the message never shows it.
      if (/[\u0000-\u0008\u000a-\u001f\u007f]/.test(value)) {
        fail(`${headersVar.name}: the value of "${key}" holds control characters`)
      }
      return [key.toLowerCase(), value] as const
    })

  const timeoutVar = either(env, "TIMEOUT")
  const timeoutMs = timeoutVar === undefined
    ? 10_000
    : integer({ [timeoutVar.name]: timeoutVar.value }, timeoutVar.name, 10_000, 1)

  const compression = either(env, "COMPRESSION")
  if (compression !== undefined && compression.value !== "gzip" && compression.value !== "none") {
    fail(`${compression.name}: "${compression.value}" is not supported; use gzip or none`)
  }

  const certificate = either(env, "CERTIFICATE")
  let ca: string | undefined
  if (certificate !== undefined) {
    try {
      ca = readFile(certificate.value)
    } catch {
      fail(`${certificate.name}: cannot read ${certificate.value}`)
    }
    if (!ca!.includes("-----BEGIN CERTIFICATE-----")) {
      fail(`${certificate.name}: ${certificate.value} holds no PEM certificate`)
    }
  }

  const attributes = new Map<string, string>()
  const resourceVar = read(env, "OTEL_RESOURCE_ATTRIBUTES")
  if (resourceVar !== undefined) {
    for (const [key, value] of parseKeyValues("OTEL_RESOURCE_ATTRIBUTES", resourceVar)) attributes.set(key, value)
  }
  attributes.set("service.name", read(env, "OTEL_SERVICE_NAME") ?? attributes.get("service.name") ?? "svc")

  const maxQueueSize = integer(env, "OTEL_BSP_MAX_QUEUE_SIZE", 2048, 1)
  const maxExportBatchSize = integer(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, 1)
  if (maxExportBatchSize > maxQueueSize) fail("OTEL_BSP_MAX_EXPORT_BATCH_SIZE must not exceed OTEL_BSP_MAX_QUEUE_SIZE")

  return {
    url: endpoint.url,
    headers,
    timeoutMs,
    gzip: compression?.value === "gzip",
    ca,
    resource: [...attributes],
    sampler: parseSampler(env),
    callerSampledPerSecond: integer(env, "SVC_OPERATOR_TRACE_PARENT_RATE", DEFAULT_CALLER_SAMPLED_PER_SECOND, 0),
    scheduleDelayMs: integer(env, "OTEL_BSP_SCHEDULE_DELAY", 5000, 1),
    exportTimeoutMs: integer(env, "OTEL_BSP_EXPORT_TIMEOUT", 30_000, 1),
    maxQueueSize,
    maxExportBatchSize
  }
}
