/**
 * A DNS server on loopback for tests (UDP, `dns-packet` for the wire
 * format): names it is told to answer get their addresses, names it is told
 * to ignore get nothing at all (the query is read and dropped: a server
 * that never answers), every other name is NXDOMAIN. Point the service at
 * it with `dnsServers: [server.address]`.
 */
import * as packet from "dns-packet"
import { Effect, type Scope } from "effect"
import { createSocket } from "node:dgram"
import { isIPv4 } from "node:net"
import { ResolveFailure, type ResolverShape } from "../../src/outbound/Resolver.ts"

export interface DnsQuery {
  readonly name: string
  readonly type: string
  readonly at: number
}

export interface TestDnsServer {
  /** `127.0.0.1:<port>`. */
  readonly address: string
  /** From now on, answer `name` with these addresses (A and AAAA by family). */
  readonly answer: (name: string, addresses: ReadonlyArray<string>) => void
  /** From now on, never answer queries for `name`. */
  readonly ignore: (name: string) => void
  /** Every query received so far. */
  readonly queries: () => ReadonlyArray<DnsQuery>
}

export const makeDnsServer: Effect.Effect<TestDnsServer, never, Scope.Scope> = Effect.gen(function*() {
  const answers = new Map<string, ReadonlyArray<string>>()
  const ignored = new Set<string>()
  const received: Array<DnsQuery> = []
  const socket = createSocket("udp4")
  socket.on("message", (message, remote) => {
    let query: packet.Packet
    try {
      query = packet.decode(message)
    } catch {
      return
    }
    const question = query.questions?.[0]
    if (question === undefined) return
    const name = question.name.toLowerCase()
    received.push({ name, type: question.type, at: Date.now() })
    if (ignored.has(name)) return
    const addresses = answers.get(name)
    const wanted = (addresses ?? []).filter((address) => (question.type === "A") === isIPv4(address))
    const reply = packet.encode({
      id: query.id,
      type: "response",
      flags: packet.RECURSION_DESIRED | packet.RECURSION_AVAILABLE | (addresses === undefined ? 3 : 0),
      questions: [question],
      answers: wanted.map((data) => ({
        type: question.type as "A" | "AAAA",
        class: "IN" as const,
        name: question.name,
        ttl: 0,
        data
      }))
    })
    socket.send(reply, remote.port, remote.address)
  })
  yield* Effect.acquireRelease(
    Effect.callback<void>((resume) => {
      socket.bind(0, "127.0.0.1", () => resume(Effect.void))
    }),
    () => Effect.sync(() => socket.close())
  )
  return {
    address: `127.0.0.1:${socket.address().port}`,
    answer: (name, addresses) => {
      ignored.delete(name)
      answers.set(name, addresses)
    },
    ignore: (name) => {
      answers.delete(name)
      ignored.add(name)
    },
    queries: () => received
  }
})

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
