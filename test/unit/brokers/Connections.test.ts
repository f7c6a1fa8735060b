/**
 * The broker connections a process keeps: one per organization and key,
 * at most `total` and at most `perOrg` for one organization (the least
 * recently used idle one closed to make room, of the organization itself
 * when it is at its share), a publish with no room waiting for a slot
 * within its time and otherwise failing as `ConnectionsBusy` naming the
 * bound, closed after `IDLE_MS` unused, and dropped once closed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { ConnectionsBusy, IDLE_MS, makeConnections } from "../../../src/brokers/Brokers.ts"
import type { BrokerConnection } from "../../../src/brokers/BrokerUrl.ts"

const settle = () => new Promise((resolve) => setImmediate(resolve))

/** A connection that only records being closed; its publishes answer when `answer` is called. */
const fake = (log: Array<string>, name: string): BrokerConnection & { answer: () => void } => {
  let closed = false
  const pending: Array<() => void> = []
  return {
    publish: () => new Promise<string>((resolve) => pending.push(() => resolve("ok"))),
    answer: () => pending.splice(0).forEach((resolve) => resolve()),
    close: () => {
      closed = true
      log.push(name)
    },
    get closed() {
      return closed
    }
  }
}

const entryOf = <A>(value: A | string): A => {
  if (typeof value === "string") throw new Error(`no room: ${value}`)
  return value
}

describe("broker connections", () => {
  it("one connection per key, reused; past the bound the least recently used idle one is closed; all busy: the bound is named", async () => {
    let now = 0
    const closedLog: Array<string> = []
    let opened = 0
    const open = (name: string) => () => {
      opened++
      return Promise.resolve(fake(closedLog, name))
    }
    const connections = makeConnections(() => now, { total: 2, perOrg: 2 })
    const a = entryOf(connections.use("a", "org", open("a")))
    connections.settled("a", a)
    now = 1
    assert.strictEqual(connections.use("a", "org", open("a")), a)
    connections.settled("a", a)
    now = 2
    connections.settled("b", entryOf(connections.use("b", "org", open("b"))))
    assert.strictEqual(opened, 2)
    now = 3
    connections.settled("a", entryOf(connections.use("a", "org", open("a"))))
    connections.use("c", "other", open("c"))
    await settle()
    assert.deepStrictEqual(closedLog, ["b"])
    assert.strictEqual(connections.size(), 2)
    connections.use("a", "org", open("a"))
    assert.strictEqual(connections.use("d", "third", open("d")), "SVC_BROKER_CONNECTIONS")
  })

  it("an organization at its share closes an idle connection of its own, never another's, and with none idle gets none; other organizations still get theirs", async () => {
    const now = 0
    const closedLog: Array<string> = []
    const open = (name: string) => () => Promise.resolve(fake(closedLog, name))
    const connections = makeConnections(() => now, { total: 10, perOrg: 2 })
    connections.settled("other-idle", entryOf(connections.use("other-idle", "other", open("other-idle"))))
    connections.settled("hog-1", entryOf(connections.use("hog-1", "hog", open("hog-1"))))
    entryOf(connections.use("hog-2", "hog", open("hog-2")))
    entryOf(connections.use("hog-3", "hog", open("hog-3")))
    await settle()
    assert.deepStrictEqual(closedLog, ["hog-1"])
    assert.strictEqual(connections.use("hog-4", "hog", open("hog-4")), "SVC_BROKER_CONNECTIONS_PER_ORG")
    entryOf(connections.use("victim", "victim", open("victim")))
    await settle()
    assert.deepStrictEqual(closedLog, ["hog-1"])
  })

  it.effect("a publish with no room waits and takes the first slot freed; one that gets none within its time fails as ConnectionsBusy naming the bound", () =>
    Effect.gen(function*() {
      const closedLog: Array<string> = []
      const busy = fake(closedLog, "busy")
      const connections = makeConnections(() => 0, { total: 1, perOrg: 1 })
      const held = entryOf(connections.use("busy", "hog", () => Promise.resolve(busy)))
      const publish = (connection: BrokerConnection) => connection.publish({} as never)
      // Nothing frees within 20 ms: refused, naming the process's bound (the victim has room of its own).
      const refused = yield* Effect.exit(
        connections.start("victim", "victim", () => Promise.resolve(fake(closedLog, "late")), publish, 20)
      )
      assert.isTrue(Exit.isFailure(refused))
      const failure = Exit.isFailure(refused) ? refused.cause.reasons[0] : undefined
      const error = failure !== undefined && failure._tag === "Fail" ? failure.error : undefined
      assert.instanceOf(error, ConnectionsBusy)
      assert.strictEqual((error as ConnectionsBusy).limit, "SVC_BROKER_CONNECTIONS")
      assert.strictEqual(connections.waiting(), 0)
      // Freed while it waits: the waiting publish gets the slot and is answered.
      const victim = fake(closedLog, "victim")
      const waiting = yield* Effect.forkChild(
        connections.start("victim", "victim", () => Promise.resolve(victim), publish, 5_000)
      )
      yield* Effect.promise(settle)
      assert.strictEqual(connections.waiting(), 1)
      connections.settled("busy", held)
      const started = yield* Fiber.join(waiting)
      yield* Effect.promise(settle)
      victim.answer()
      assert.strictEqual(yield* Effect.promise(() => started.published), "ok")
      assert.deepStrictEqual(closedLog, ["busy"])
    }))

  it("idle connections are closed after IDLE_MS; busy ones stay; a closed or failed one is dropped", async () => {
    let now = 0
    const closedLog: Array<string> = []
    const connections = makeConnections(() => now, { total: 256, perOrg: 256 })
    const idle = entryOf(connections.use("idle", "org", () => Promise.resolve(fake(closedLog, "idle"))))
    connections.settled("idle", idle)
    const busy = entryOf(connections.use("busy", "org", () => Promise.resolve(fake(closedLog, "busy"))))
    connections.use("failed", "org", () => Promise.reject(new Error("ECONNREFUSED")))
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
    const kept = entryOf(connections.use("restarted", "org", () => Promise.resolve(fake(closedLog, "restarted"))))
    connections.settled("restarted", kept)
    await settle()
    ;(await kept.opening).close()
    const replaced = entryOf(connections.use("restarted", "org", () => Promise.resolve(fake(closedLog, "replacement"))))
    assert.notStrictEqual(replaced, kept)
    assert.isFalse((await replaced.opening).closed)
    connections.discard("restarted", replaced)
    await settle()
    const connection = await busy.opening
    connection.close()
    connections.settled("busy", busy)
    await settle()
    assert.strictEqual(connections.size(), 0)
  })
})
