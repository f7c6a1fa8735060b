/**
 * Logs are JSON lines on stdout: `time`, `level`, `message`, then the
 * request id, organization id and trace id when known, then any other
 * annotations. Annotation keys that name credentials are masked as a last
 * line of defence; the code never logs them on purpose.
 */
import { Cause, Context, Layer, Logger, References } from "effect"
import { logLevelConfig } from "./Config.ts"

const SENSITIVE_KEY = /authorization|secret|password|passwd|api[-_]?key|token|cookie|credential|signature/i

/**
 * `context` whose log lines carry one more annotation: what
 * `Effect.annotateLogs` does, as a context step for code that adds a
 * service in the same step (`provideService` and `annotateLogs` take a
 * step each; a request passes two such places). `current`: the
 * annotations in effect (`fiber.getRef(References.CurrentLogAnnotations)`).
 */
export const withLogAnnotation = <R>(
  context: Context.Context<R>,
  current: Readonly<Record<string, unknown>>,
  key: string,
  value: unknown
): Context.Context<R> => Context.add(context, References.CurrentLogAnnotations, { ...current, [key]: value })

/** Whether an annotation key names a credential, remembered per key (the same few keys come on every line). */
const sensitiveKeys = new Map<string, boolean>()
const isSensitive = (key: string): boolean => {
  let sensitive = sensitiveKeys.get(key)
  if (sensitive === undefined) {
    sensitive = SENSITIVE_KEY.test(key)
    if (sensitiveKeys.size < 1000) sensitiveKeys.set(key, sensitive)
  }
  return sensitive
}

const plain = (value: unknown): unknown => {
  if (value instanceof Error) return value.message
  if (typeof value === "bigint") return value.toString()
  return value
}

/** Per-request facts that inner layers learn (the organization) and the request log line reports. */
export class RequestFacts extends Context.Reference<{ orgId?: string } | undefined>("svc/platform/RequestFacts", {
  defaultValue: () => undefined
}) {}

/** A JSON-lines logger writing each line to `write`. */
export const makeJsonLogger = (write: (line: string) => void) =>
  Logger.make<unknown, void>(({ cause, date, fiber, logLevel, message }) => {
    const entry: Record<string, unknown> = {
      time: date.toISOString(),
      level: logLevel.toUpperCase(),
      message: !Array.isArray(message) ? plain(message) : message.length === 1 ? plain(message[0]) : message.map(plain)
    }
    // Every request writes a line: the annotations are read in place (no
    // array of entries per line).
    const annotations = fiber.getRef(References.CurrentLogAnnotations)
    for (const key in annotations) {
      entry[key] = isSensitive(key) ? "[redacted]" : plain(annotations[key])
    }
    const span = fiber.cache.span
    if (span !== undefined && entry.trace_id === undefined) {
      entry.trace_id = span.traceId
      entry.span_id = span.spanId
    }
    if (cause.reasons.length > 0) entry.cause = Cause.pretty(cause)
    write(JSON.stringify(entry))
  })

// One write per line, synchronous (stdout to a file or a pipe): a line is
// out before the response it describes (batching lines per event-loop turn
// saved a system call per request but let answers overtake their lines).
const jsonLogger = makeJsonLogger((line) => process.stdout.write(line + "\n"))

/**
 * `logger` instead of the default one, writing lines of `SVC_LOG_LEVEL`
 * and more severe; an unknown level fails the start naming the variable.
 */
export const loggingLayer = (logger: Logger.Logger<unknown, void>) =>
  Layer.merge(Logger.layer([logger]), Layer.effect(References.MinimumLogLevel, logLevelConfig))

/** Replaces the default logger with JSON lines, at `SVC_LOG_LEVEL`. */
export const LoggingLive = loggingLayer(jsonLogger)
