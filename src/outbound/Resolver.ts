/**
 * Name resolution for outbound requests, as a replaceable service.
 *
 * `OutboundHttp` resolves a host exactly once per check or send through
 * this service and then connects only to the addresses it checked, so the
 * resolver is the one place a test can make DNS answer differently from one
 * call to the next (a rebinding attack) or map a made-up name to loopback.
 *
 * It is a `Context.Reference`: the system resolver is used unless a test
 * provides another (`Layer.succeed(Resolver, Resolver.fixed({...}))`).
 */
import { Context, Data, Effect } from "effect"
import { lookup } from "node:dns/promises"

/** The name did not resolve (no such name, no address, or the resolver failed). */
export class ResolveFailure extends Data.TaggedError("ResolveFailure")<{
  /** e.g. `ENOTFOUND`, `EAI_AGAIN`, `ENODATA`. */
  readonly code: string
}> {}

export interface ResolverShape {
  /** Every address `hostname` resolves to, canonical text (`1.2.3.4`, `2001:db8::1`). */
  readonly resolve: (hostname: string) => Effect.Effect<ReadonlyArray<string>, ResolveFailure>
}

/**
 * The operating system's resolver (`getaddrinfo`, so `/etc/hosts` counts),
 * every address of every family, in the order the system prefers.
 */
export const systemResolver: ResolverShape = {
  resolve: (hostname) =>
    Effect.tryPromise({
      try: () => lookup(hostname, { all: true, order: "verbatim" }),
      catch: (cause) =>
        new ResolveFailure({
          code: typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
            ? cause.code
            : "EAI_FAIL"
        })
    }).pipe(
      Effect.flatMap((answers) =>
        answers.length === 0
          ? Effect.fail(new ResolveFailure({ code: "ENODATA" }))
          : Effect.succeed(answers.map((answer) => answer.address))
      )
    )
}

/**
 * A resolver answering from a table, for tests. A value that is a function
 * is called on every resolution (so it can answer differently each time);
 * a name that is not in the table fails with `ENOTFOUND`.
 */
export const fixedResolver = (
  table: Readonly<Record<string, ReadonlyArray<string> | ((call: number) => ReadonlyArray<string>)>>
): ResolverShape & { readonly calls: (hostname: string) => number } => {
  const counts = new Map<string, number>()
  return {
    calls: (hostname) => counts.get(hostname) ?? 0,
    resolve: (hostname) =>
      Effect.suspend(() => {
        const call = (counts.get(hostname) ?? 0) + 1
        counts.set(hostname, call)
        const entry = Object.hasOwn(table, hostname) ? table[hostname] : undefined
        const answers = typeof entry === "function" ? entry(call) : entry
        return answers === undefined || answers.length === 0
          ? Effect.fail(new ResolveFailure({ code: "ENOTFOUND" }))
          : Effect.succeed(answers)
      })
  }
}

export const Resolver = Context.Reference<ResolverShape>("svc/outbound/Resolver", {
  defaultValue: () => systemResolver
})
