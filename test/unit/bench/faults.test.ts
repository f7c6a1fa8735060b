/**
 * The fault study's parts that decide its figures (`bench/faults.ts` itself
 * never runs in `npm test`): which fault a repeated delivery is owed to,
 * the counts against the stated bound, the recording receiver's ids,
 * repeats and per-process counts, and the proxy that loses the answer of a
 * statement that committed.
 */
import { randomBytes } from "node:crypto"
import pg from "pg"
import { Agent, request } from "undici"
import { describe, expect, it } from "vitest"
import { spawnChild } from "../../../bench/support/child.ts"
import { boundPerEndpoint, type FaultWindow, summarize, tally } from "../../../bench/support/fault-tally.ts"
import { replyDropper } from "../../../bench/support/pg-reply-dropper.ts"
import type { Progress, Report, Senders } from "../../../bench/support/recording-receiver.ts"
import { makeTestTls } from "../../support/tls.ts"

const kill = (at: number, until = at + 5): FaultWindow => ({ kind: "kill", at, until })
const crash = (at: number, until: number): FaultWindow => ({ kind: "crash", at, until })

describe("the fault study's tally", () => {
  it("owes each repeat to the first fault after the receipt before it, and counts a repeat with no fault between apart", () => {
    const faults = [kill(1_000), crash(5_000, 9_000), kill(20_000)]
    const t = tally(faults, {
      "/e0": [
        // Sent just before the first kill, sent again after its lease ran out (past the second fault's start).
        ["a", [990, 31_000]],
        // Sent twice after faults: each repeat to the fault before it.
        ["b", [999, 12_000, 25_000]],
        // Received during the crash (a send in flight finishing), sent again later: the crash's.
        ["c", [7_000, 8_500]]
      ],
      "/e1": [
        // Landed a moment after the kill's signal but before the process was gone: the kill's.
        ["a", [1_003, 30_000]],
        // No fault between the two receipts.
        ["d", [10_000, 11_000]]
      ]
    })
    expect(t.total).toBe(6)
    expect(t.faults[0]).toEqual({
      duplicates: 3,
      byEndpoint: { "/e0": 2, "/e1": 1 },
      worstEndpoint: 2,
      lastRepeatMs: 30_000
    })
    expect(t.faults[1]).toEqual({ duplicates: 1, byEndpoint: { "/e0": 1 }, worstEndpoint: 1, lastRepeatMs: 3_500 })
    expect(t.faults[2]).toEqual({ duplicates: 1, byEndpoint: { "/e0": 1 }, worstEndpoint: 1, lastRepeatMs: 5_000 })
    expect(t.outside).toEqual([{ endpoint: "/e1", id: "d", previous: 10_000, repeat: 11_000 }])
  })

  it("holds each kind of fault to its bound: four times the in-flight limit per kill and endpoint, none per crash", () => {
    expect(boundPerEndpoint("kill", 16)).toBe(64)
    expect(boundPerEndpoint("crash", 16)).toBe(0)
    const faults = [kill(1_000), kill(50_000), crash(80_000, 85_000)]
    const many = (prefix: string, n: number, first: number, again: number) =>
      Array.from({ length: n }, (_, i) => [`${prefix}${i}`, [first, again]] as const)
    const t = tally(faults, {
      "/e0": [...many("x", 65, 900, 30_000), ...many("y", 4, 49_000, 70_000), ...many("z", 1, 84_000, 90_000)],
      "/e1": many("w", 10, 900, 31_000)
    })
    const kills = summarize("kill", faults, t, 16)
    expect(kills).toEqual({
      faults: 2,
      duplicates: 79,
      worstPerFault: 75,
      meanPerFault: 39.5,
      worstPerEndpoint: 65,
      boundPerEndpoint: 64,
      overBound: 1
    })
    const crashes = summarize("crash", faults, t, 16)
    expect(crashes).toMatchObject({ faults: 1, duplicates: 1, worstPerEndpoint: 1, boundPerEndpoint: 0, overBound: 1 })
  })
})

describe("the recording receiver", () => {
  it("records each request's event id by path, and reports the missing ids, the repeats and the senders", async () => {
    const tls = await makeTestTls()
    const receiver = await spawnChild(
      "receiver",
      new URL("../../../bench/support/recording-receiver.ts", import.meta.url),
      {
        BENCH_TLS_CERT: tls.cert,
        BENCH_TLS_KEY: tls.key,
        BENCH_DELAY_MIN_MS: "0",
        BENCH_DELAY_MAX_MS: "0"
      }
    )
    try {
      const url = await receiver.call<string>("url")
      const dispatcher = new Agent({ connect: { ca: [tls.caCert] }, connections: 1 })
      const post = async (path: string, id: string) => {
        const response = await request(`${url}${path}?x=1`, {
          method: "POST",
          headers: { "x-svc-event-id": id },
          body: "{}",
          dispatcher
        })
        await response.body.dump()
        return response.statusCode
      }
      expect(await post("/e0", "a")).toBe(204)
      expect(await post("/e0", "b")).toBe(204)
      expect(await post("/e0", "a")).toBe(204)
      expect(await post("/e1", "a")).toBe(204)
      expect(await receiver.call<Progress>("progress")).toEqual({
        "/e0": { receipts: 3, distinct: 2 },
        "/e1": { receipts: 1, distinct: 1 }
      })
      // Its own port is not a sender's: nothing is counted for it.
      expect(await receiver.call<Senders>("senders", { ports: [1] })).toEqual({ answering: {}, lastSecond: {} })
      const report = await receiver.call<Report>("report", { paths: ["/e0", "/e1"], ids: ["a", "b", "c"] })
      expect(report.paths["/e0"]).toMatchObject({
        receipts: 3,
        distinct: 2,
        missing: ["c"],
        missingCount: 1,
        unexpected: 0,
        pauses: []
      })
      expect(report.paths["/e0"]!.repeated.map(([id, times]) => [id, times.length])).toEqual([["a", 2]])
      expect(report.paths["/e1"]).toMatchObject({
        receipts: 1,
        distinct: 1,
        missing: ["b", "c"],
        missingCount: 2,
        repeated: []
      })
      expect(report.byProcess).toEqual({ "?": 4 })
      await dispatcher.close()
    } finally {
      await receiver.stop()
    }
  })
})

const serverUrl = process.env.TEST_DATABASE_URL

describe.skipIf(!serverUrl)("the proxy that loses an answer", () => {
  it("passes statements through until armed, then closes the connection once the armed statement has committed", async () => {
    const url = new URL(serverUrl!)
    const table = `dropper_probe_${randomBytes(4).toString("hex")}`
    const direct = new pg.Client({ connectionString: url.toString() })
    await direct.connect()
    const dropper = await replyDropper({ host: url.hostname, port: Number(url.port || 5432) })
    const proxied = () => {
      const client = new pg.Client({
        connectionString: Object.assign(new URL(url), { port: String(dropper.port) }).toString()
      })
      client.on("error", () => {})
      return client
    }
    try {
      await direct.query(`CREATE TABLE ${table} (n int)`)
      const first = proxied()
      await first.connect()
      // Unarmed: simple and extended protocol both pass.
      await first.query(`INSERT INTO ${table} VALUES (1)`)
      expect((await first.query(`SELECT count(*)::int AS n FROM ${table} WHERE n > $1`, [0])).rows).toEqual([{ n: 1 }])
      // Armed for a prepared (extended protocol) insert: an error here, the row there.
      const dropped = dropper.drop(`INSERT INTO ${table} VALUES ($1`)
      await expect(first.query(`SELECT $1::int AS n`, [5])).resolves.toMatchObject({ rows: [{ n: 5 }] })
      await expect(first.query(`INSERT INTO ${table} VALUES ($1)`, [2])).rejects.toThrow()
      expect((await dropped).statement).toContain(`INSERT INTO ${table}`)
      expect((await direct.query(`SELECT array_agg(n ORDER BY n) AS n FROM ${table}`)).rows).toEqual([{ n: [1, 2] }])
      // A simple query the same way; other connections are untouched.
      const second = proxied()
      await second.connect()
      const again = dropper.drop(`INSERT INTO ${table} VALUES (3)`)
      await expect(second.query(`INSERT INTO ${table} VALUES (3)`)).rejects.toThrow()
      await again
      const third = proxied()
      await third.connect()
      expect((await third.query(`SELECT array_agg(n ORDER BY n) AS n FROM ${table}`)).rows).toEqual([{ n: [1, 2, 3] }])
      await third.end()
    } finally {
      await dropper.close()
      await direct.query(`DROP TABLE IF EXISTS ${table}`)
      await direct.end()
    }
  })
})
