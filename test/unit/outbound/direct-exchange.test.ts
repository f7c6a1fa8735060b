/**
 * The direct exchange (`sendDirect`): the same answers as `send`, and a
 * defect in name resolution shown in the log, not hidden behind the
 * network failure it answers.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Logger, Option, type Tracer } from "effect"
import { OutboundFailure, OutboundHttp, type OutboundResponse } from "../../../src/outbound/OutboundHttp.ts"
import { Resolver, type ResolverShape } from "../../../src/outbound/Resolver.ts"
import { SvcConfig } from "../../../src/platform/Config.ts"
import { makeJsonLogger } from "../../../src/platform/Logging.ts"
import { eventually } from "../../support/http.ts"

/** A span that only keeps its attributes. */
const recordingSpan = () => {
  const attributes = new Map<string, unknown>()
  const span = { attribute: (key: string, value: unknown) => attributes.set(key, value) } as unknown as Tracer.Span
  return { span, attributes }
}

/** `OutboundHttp` with `resolver`, its log lines written to `lines`. */
const outbound = (resolver: ResolverShape, lines: Array<string>) =>
  OutboundHttp.layer.pipe(
    Layer.provide(SvcConfig.layerWith({ allowedTargetCidrs: [], extraCaFile: Option.none() })),
    Layer.provide(Layer.succeed(Resolver, resolver)),
    Layer.provide(Logger.layer([makeJsonLogger((line) => lines.push(line))])),
    Layer.orDie
  )

/** What `sendDirect` answers for `url`, and how many answers it gave. */
const sendDirect = (url: string) =>
  Effect.gen(function*() {
    const http = yield* OutboundHttp
    const answers: Array<OutboundResponse | OutboundFailure> = []
    const { span } = recordingSpan()
    http.sendDirect({ url, method: "POST", headers: {}, timeout: "5 seconds" }, span, (sent) => answers.push(sent))
    return yield* eventually(Effect.sync(() => answers.length > 0 ? answers : undefined), { what: "the answer" })
  })

describe("sendDirect", () => {
  it.live("a defect in name resolution is logged with its cause, and the send answers a network failure", () => {
    const lines: Array<string> = []
    const dying: ResolverShape = { resolve: () => Effect.die(new Error("resolver bug")) }
    return Effect.gen(function*() {
      const answers = yield* sendDirect("https://hooks.example.com/x")
      assert.strictEqual(answers.length, 1)
      const failure = answers[0]
      assert.instanceOf(failure, OutboundFailure)
      assert.strictEqual((failure as OutboundFailure).reason, "network")
      const logged = yield* eventually(
        Effect.sync(() => lines.find((line) => line.includes("resolving the host name failed"))),
        { what: "the defect logged", timeoutMs: 2_000 }
      )
      assert.include(logged, "resolver bug")
      assert.include(logged, "ERROR")
    }).pipe(Effect.provide(outbound(dying, lines)))
  })

  it.live("a refused IP literal and a refused name answer the same unsafe_target failure as send", () => {
    const lines: Array<string> = []
    const loopback: ResolverShape = { resolve: () => Effect.succeed(["127.0.0.1"]) }
    return Effect.gen(function*() {
      for (const url of ["https://127.0.0.1/x", "https://loopback.example.com/x"]) {
        const [failure] = yield* sendDirect(url)
        assert.instanceOf(failure, OutboundFailure)
        assert.strictEqual((failure as OutboundFailure).reason, "unsafe_target")
        assert.include((failure as OutboundFailure).message, "non-public address")
      }
    }).pipe(Effect.provide(outbound(loopback, lines)))
  })
})
