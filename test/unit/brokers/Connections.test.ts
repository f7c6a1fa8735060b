/**
 * The broker connections a process keeps: one per key, at most `max`
 * (the least recently used idle one closed to make room, none opened while
 * all are busy), closed after `IDLE_MS` unused, and dropped once closed.
 */
import { assert, describe, it } from "@effect/vitest"
import { IDLE_MS, makeConnections } from "../../../src/brokers/Brokers.ts"
import type { BrokerConnection } from "../../../src/brokers/BrokerUrl.ts"

const settle = () => new Promise((resolve) => setImmediate(resolve))

/** A connection that only records being closed. */
const fake = (log: Array<string>, name: string): BrokerConnection => {
  let closed = false
  return {
    publish: async () => "ok",
    close: () => {
      closed = true
      log.push(name)
    },
    get closed() {
      return closed
    }
  }
}

describe("broker connections", () => {
  it("one connection per key, reused; past the bound the least recently used idle one is closed; all busy: none", async () => {
    let now = 0
    const closedLog: Array<string> = []
    let opened = 0
    const open = (name: string) => () => {
      opened++
      return Promise.resolve(fake(closedLog, name))
    }
    const connections = makeConnections(() => now, 2)
    const a = connections.use("a", open("a"))!
    now = 1
    assert.strictEqual(connections.use("a", open("a")), a)
    now = 2
    connections.use("b", open("b"))
    assert.strictEqual(opened, 2)
    now = 3
    connections.use("a", open("a"))
    connections.use("c", open("c"))
    await settle()
    assert.deepStrictEqual(closedLog, ["b"])
    assert.strictEqual(connections.size(), 2)
    for (const key of ["a", "c"]) connections.use(key, open(key))!.inFlight += 1
    assert.isUndefined(connections.use("d", open("d")))
  })

  it("idle connections are closed after IDLE_MS; busy ones stay; a closed or failed one is dropped", async () => {
    let now = 0
    const closedLog: Array<string> = []
    const connections = makeConnections(() => now)
    connections.use("idle", () => Promise.resolve(fake(closedLog, "idle")))
    connections.use("busy", () => Promise.resolve(fake(closedLog, "busy")))!.inFlight += 1
    connections.use("failed", () => Promise.reject(new Error("ECONNREFUSED")))
    await settle()
    assert.strictEqual(connections.size(), 2)
    now = IDLE_MS - 1
    connections.sweep()
    assert.strictEqual(connections.size(), 2)
    now = IDLE_MS
    connections.sweep()
    await settle()
    assert.deepStrictEqual(closedLog, ["idle"])
    // Closed by the broker while idle: the next use opens another instead of failing on it.
    const kept = connections.use("restarted", () => Promise.resolve(fake(closedLog, "restarted")))!
    await settle()
    ;(await kept.opening).close()
    const replaced = connections.use("restarted", () => Promise.resolve(fake(closedLog, "replacement")))!
    assert.notStrictEqual(replaced, kept)
    assert.isFalse((await replaced.opening).closed)
    connections.discard("restarted", replaced)
    await settle()
    const busy = connections.use("busy", () => Promise.reject(new Error("not opened again")))!
    const connection = await busy.opening
    connection.close()
    connections.settled("busy", busy)
    await settle()
    assert.strictEqual(connections.size(), 0)
  })
})
