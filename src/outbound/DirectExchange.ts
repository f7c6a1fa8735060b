/**
 * `OutboundHttp.send` without a fiber of its own, for the webhook sends that
 * run without one (`src/deliveries/worker/DirectStart.ts`): the same checks, span
 * attributes and exchange; an IP literal's exchange starts at once, a
 * name's resolution alone runs as an effect.
 *
 * Speeds up: the exchange of each send, with no fiber, context, generators
 * or `Effect.callback`; with the direct start, the Effect runtime's share of
 * svc's samples in the sends went from 10 % to 1 %
 * (`bench/notes/delivery-log.md`, "What was cut").
 */
import { Cause, type Context, Effect, Exit, Option, type Tracer } from "effect"
import type { Address } from "./AddressPolicy.ts"
import { OutboundFailure, type OutboundRequest, type OutboundResponse, type Prepared } from "./Request.ts"
import type { Target } from "./TargetUrl.ts"

/** What an exchange ends with: the answer, or why there was none. */
export type Sent = OutboundResponse | OutboundFailure

/** The steps of `OutboundHttp.send`, from its layer, that the direct exchange takes in the same order. */
export interface ExchangeSteps {
  /** The request's deadline and parsed target, or why it cannot be sent at all. */
  readonly prepare: (request: OutboundRequest) => Prepared | OutboundFailure
  readonly requestAttributes: (request: OutboundRequest, target: Target) => Readonly<Record<string, unknown>>
  /** An IP literal host's checked address, or its refusal; `undefined` for a host name. */
  readonly literal: (prepared: Prepared) => ReadonlyArray<Address> | OutboundFailure | undefined
  /** A host name's resolution, every address checked, within `timeoutMs`. */
  readonly addresses: (
    target: Target,
    orgId: string | undefined,
    timeoutMs: number
  ) => Effect.Effect<ReadonlyArray<Address>, OutboundFailure>
  /** The exchange with the checked addresses; `done` called once. */
  readonly exchange: (
    request: OutboundRequest,
    prepared: Prepared,
    addresses: ReadonlyArray<Address>,
    done: (sent: Sent) => void
  ) => () => void
  /** The layer's context, where a resolution's defect is logged. */
  readonly context: Context.Context<never>
}

/**
 * The direct exchange: `request`'s attributes put on `span`, `done` called
 * once with the answer or the failure, never before it returns.
 */
export const directExchange =
  (steps: ExchangeSteps) => (request: OutboundRequest, span: Tracer.Span, done: (sent: Sent) => void): void => {
    // Whatever ends before this returns (a refusal, undici reporting
    // invalid arguments at once, a name resolved from the hosts file)
    // is reported after it returns, as its contract says.
    let returned = false
    const report = (sent: Sent) => {
      if (!(sent instanceof OutboundFailure)) span.attribute("http.response.status_code", sent.status)
      if (returned) done(sent)
      else queueMicrotask(() => done(sent))
    }
    const prepared = steps.prepare(request)
    if (prepared instanceof OutboundFailure) {
      report(prepared)
    } else {
      const attributes = steps.requestAttributes(request, prepared.target)
      for (const key in attributes) span.attribute(key, attributes[key])
      const literal = steps.literal(prepared)
      if (literal === undefined) {
        Effect.runCallback(steps.addresses(prepared.target, request.orgId, prepared.timeoutMs), {
          onExit: (exit) => {
            if (Exit.isSuccess(exit)) {
              steps.exchange(request, prepared, exit.value, report)
              return
            }
            const failure = Cause.findErrorOption(exit.cause)
            if (Option.isSome(failure)) {
              report(failure.value)
              return
            }
            // A defect is a bug, not the receiver's failure: shown as the
            // effect path would show it, while the send answers a failure.
            Effect.runForkWith(steps.context)(
              Effect.logError("resolving the host name failed; answered as a network failure", exit.cause)
            )
            report(new OutboundFailure({ reason: "network", message: "the host name could not be resolved" }))
          }
        })
      } else if (literal instanceof OutboundFailure) {
        report(literal)
      } else {
        steps.exchange(request, prepared, literal, report)
      }
    }
    returned = true
  }
