/**
 * `SVC_LOG_LEVEL` sets the least severe line svc writes: `info` by
 * default, any case; an unknown level fails the start naming the variable.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer } from "effect"
import { logLevelConfig } from "../../../src/platform/Config.ts"
import { loggingLayer, makeJsonLogger } from "../../../src/platform/Logging.ts"

const linesAt = (env: Record<string, string>) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    yield* Effect.gen(function*() {
      yield* Effect.logDebug("a debug line")
      yield* Effect.logInfo("an info line")
      yield* Effect.logWarning("a warning")
      yield* Effect.logError("an error")
    }).pipe(
      Effect.provide(
        loggingLayer(makeJsonLogger((line) => lines.push(line))).pipe(
          Layer.provide(ConfigProvider.layer(ConfigProvider.fromUnknown(env)))
        )
      )
    )
    return lines.map((line) => JSON.parse(line).message as string)
  })

describe("SVC_LOG_LEVEL", () => {
  it.effect("info by default: debug lines are left out", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* linesAt({}), ["an info line", "a warning", "an error"])
    }))

  it.effect("warn writes warnings and errors only; debug writes everything; the case does not matter", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* linesAt({ SVC_LOG_LEVEL: "warn" }), ["a warning", "an error"])
      assert.deepStrictEqual(yield* linesAt({ SVC_LOG_LEVEL: "DEBUG" }), [
        "a debug line",
        "an info line",
        "a warning",
        "an error"
      ])
      assert.deepStrictEqual(yield* linesAt({ SVC_LOG_LEVEL: "none" }), [])
    }))

  it.effect("an unknown level fails the start naming the variable and the levels", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(logLevelConfig.parse(ConfigProvider.fromUnknown({ SVC_LOG_LEVEL: "loud" })))
      assert.include(String(error), "SVC_LOG_LEVEL")
      assert.include(String(error), "trace, debug, info, warn, error, fatal, none")
    }))
})
