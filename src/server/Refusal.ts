/**
 * How a server start that cannot go on ends: one JSON line naming why, and
 * the exit code of that reason (`reportStartFailure`, the reasons in
 * `platform/StartFailure.ts`). The settings it reads from the environment
 * are checked before anything else of the server loads (`settingsUsable`):
 * one it cannot use ends the start with that line, before the server's
 * modules and the embedded database have loaded. The start then reads them
 * again, as it always did.
 *
 * Speeds up: a start refused for a setting (`PORT=eighty`, an unknown
 * `SVC_LOG_LEVEL`, an `OTEL_*` value svc cannot honour), on the embedded
 * database on two cores: 1.16-1.21 s and 1.5 CPU-s before, 0.55-0.60 s
 * and 0.8 CPU-s after (three runs each). A start that goes on is no
 * slower (its modules load once; the settings are parsed twice, well
 * under a millisecond more).
 */
import { Cause, DateTime, Effect } from "effect"
import { OtelEnvError, parseOtelEnv } from "../observability/OtelEnv.ts"
import { logLevelConfig, svcConfig } from "../platform/Config.ts"
import { startFailure } from "../platform/StartFailure.ts"

/**
 * One JSON line for a failure that stops svc (the logs' format, written
 * directly: the logger may be what failed to start, for an unknown
 * `SVC_LOG_LEVEL`): what went wrong, the setting at fault, and the exit
 * code, which differs by reason (`EXIT_CODES` in `StartFailure.ts`).
 */
export const reportStartFailure = (cause: Cause.Cause<unknown>): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (Cause.hasInterruptsOnly(cause)) return
    const refused = startFailure(cause)
    const time = DateTime.formatIso(yield* DateTime.now)
    process.exitCode = refused.exitCode
    process.stdout.write(`${
      JSON.stringify({
        time,
        level: "ERROR",
        message: refused.message,
        reason: refused.reason,
        ...(refused.setting === undefined ? {} : { setting: refused.setting }),
        exit_code: refused.exitCode
      })
    }\n`)
  })

/** Whether every setting can be used; otherwise the first it cannot is reported and the exit code set. */
export const settingsUsable = (): Promise<boolean> =>
  Effect.runPromise(
    Effect.gen(function*() {
      yield* logLevelConfig
      yield* svcConfig
      yield* Effect.try({
        try: () => parseOtelEnv(process.env),
        catch: (error) => error instanceof OtelEnvError ? error : new OtelEnvError(String(error))
      })
      return true
    }).pipe(
      Effect.catchCause((cause) => Effect.as(reportStartFailure(cause), false))
    )
  )
