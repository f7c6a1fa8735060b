/**
 * The upstream sessions a process keeps (`src/mcp/UpstreamSessions.ts`):
 * one per key, reused; let go after a failure, when idle too long, or when
 * more are kept than the bound (the least recently used first, closed only
 * once its calls are over); a kept session the server no longer knows is
 * replaced and the call sent once more, a new one's refusal is not.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { makeUpstreamSessions, SessionExpired } from "../../../src/mcp/UpstreamSessions.ts"

/** Fake clients: each `open` makes a numbered one that records whether it was closed. */
const opener = () => {
  const opened: Array<{ readonly n: number; closed: boolean }> = []
  const open = async () => {
    const fake = { n: opened.length + 1, closed: false }
    opened.push(fake)
    return { n: fake.n, close: async () => void (fake.closed = true) } as unknown as Client
  }
  return { opened, open }
}
const numberOf = async (client: Client) => (client as unknown as { n: number }).n

describe("kept upstream sessions", () => {
  it("a key's session is opened once and reused; another key has its own", async () => {
    const sessions = makeUpstreamSessions()
    const { opened, open } = opener()
    assert.strictEqual(await sessions.use("org server-a", open, numberOf), 1)
    assert.strictEqual(await sessions.use("org server-a", open, numberOf), 1)
    assert.strictEqual(await sessions.use("org server-b", open, numberOf), 2)
    assert.strictEqual(opened.length, 2)
    await sessions.closeAll()
    assert.isTrue(opened.every((c) => c.closed))
  })

  it("a failed exchange lets the session go: the next call opens another", async () => {
    const sessions = makeUpstreamSessions()
    const { opened, open } = opener()
    await sessions.use("k", open, numberOf)
    const failed = await sessions.use("k", open, () => Promise.reject(new Error("reset"))).catch((e) => e)
    assert.strictEqual((failed as Error).message, "reset")
    assert.isTrue(opened[0]!.closed)
    assert.strictEqual(await sessions.use("k", open, numberOf), 2)
  })

  it("a kept session the server forgot is replaced and the call sent once more; a new session's refusal is the answer", async () => {
    const sessions = makeUpstreamSessions()
    const { opened, open } = opener()
    await sessions.use("k", open, numberOf)
    const sent: Array<number> = []
    const answer = await sessions.use("k", open, async (client) => {
      const n = await numberOf(client)
      sent.push(n)
      if (n === 1) throw new SessionExpired("404")
      return n
    })
    assert.strictEqual(answer, 2)
    assert.deepStrictEqual(sent, [1, 2])

    sessions.use("other", open, numberOf)
    const refused = await sessions.use("fresh", open, async () => {
      throw new SessionExpired("404")
    }).catch((e) => e)
    assert.instanceOf(refused, SessionExpired)
    assert.strictEqual(opened.length, 4)
  })

  it("past the bound the least recently used session is let go, closed once its call is over", async () => {
    const sessions = makeUpstreamSessions({ max: 2, idleMs: 60_000 })
    const { opened, open } = opener()
    let finish = () => {}
    const running = sessions.use(
      "a",
      open,
      (client) => new Promise<number>((resolve) => (finish = () => resolve(0))).then(() => numberOf(client))
    )
    await sessions.use("b", open, numberOf)
    await sessions.use("c", open, numberOf)
    // "a" is let go (least recently used) but its call is still running.
    assert.isFalse(opened[0]!.closed)
    finish()
    assert.strictEqual(await running, 1)
    assert.isTrue(opened[0]!.closed)
    // "b" and "c" are kept.
    assert.strictEqual(await sessions.use("b", open, numberOf), 2)
    assert.strictEqual(await sessions.use("c", open, numberOf), 3)
    assert.strictEqual(await sessions.use("a", open, numberOf), 4)
  })

  it("a session idle past the limit is let go at the next look-up", async () => {
    // A negative limit: every session is idle too long at the next look-up.
    const sessions = makeUpstreamSessions({ max: 10, idleMs: -1 })
    const { opened, open } = opener()
    await sessions.use("a", open, numberOf)
    await sessions.use("b", open, numberOf)
    assert.isTrue(opened[0]!.closed)
    assert.strictEqual(await sessions.use("a", open, numberOf), 3)
  })
})
