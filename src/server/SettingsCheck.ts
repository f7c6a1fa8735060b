/**
 * The settings a server start reads from the environment, checked before
 * anything else of the server loads: one it cannot use ends the start with
 * the same JSON line and exit code as before (`StartFailure.ts`), but
 * before the server's modules and the embedded database have loaded. The
 * start then reads them again, as it always did.
 *
 * Speeds up: a start refused for a setting (`PORT=eighty`, an unknown
 * `SVC_LOG_LEVEL`, an `OTEL_*` value svc cannot honour), on the embedded
 * database on two cores: 1.16-1.21 s and 1.5 CPU-s before, 0.55-0.60 s
 * and 0.8 CPU-s after (three runs each). A start that goes on is no
 * slower (its modules load once; the settings are parsed twice, well
 * under a millisecond more).
 */
import { Effect } from "effect"
import { OtelEnvError, parseOtelEnv } from "../observability/OtelEnv.ts"
import { logLevelConfig, svcConfig } from "../platform/Config.ts"
import { reportStartFailure } from "../platform/StartFailure.ts"

/** Whether every setting can be used; otherwise the first it cannot is reported and the exit code set. */
export const settingsUsable = (): Promise<boolean> =>
  Effect.runPromise(Effect.gen(function*() {
    yield* logLevelConfig
    yield* svcConfig
    yield* Effect.try({
      try: () => parseOtelEnv(process.env),
      catch: (error) => error instanceof OtelEnvError ? error : new OtelEnvError(String(error))
    })
    return true
  }).pipe(
    Effect.catchCause((cause) => Effect.as(reportStartFailure(cause), false))
  ))
