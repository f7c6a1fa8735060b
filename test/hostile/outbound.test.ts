/**
 * What svc sends to a tenant's addresses and what it takes back from them:
 * webhook endpoints with the most and longest headers, URLs and filters,
 * receivers and collectors that answer with an endless, huge or trickled
 * body or never, and broker addresses that speak garbage, while another
 * organization's requests are timed (test/support/hostile.ts).
 */
import { createServer as createHttpsServer, type Server } from "node:https"
import { type AddressInfo, createServer as createTcpServer, type Server as TcpServer, type Socket } from "node:net"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { type Answer, type Hostile, inParallel, startHostile } from "../support/hostile.ts"

const MAX_ENDPOINTS = 50
const MAX_HEADERS = 10
const MAX_HEADER_VALUE = 4096
const MAX_URL = 2048
const MAX_FILTERS = 50

const refusedOrServed = (answers: ReadonlyArray<Answer>) => {
  const bad = answers.filter((answer) => answer.status === 0 || answer.status === 500)
  assert.deepStrictEqual(bad.map((answer) => `${answer.status} ${answer.text.slice(0, 300)}`), [])
}

const passes = (figures: { readonly failures: ReadonlyArray<string> }) => assert.deepStrictEqual(figures.failures, [])

/** How a hostile receiver answers, by the first segment of the path. */
type Mode = "endless" | "huge" | "trickle" | "hang"
const MODES: ReadonlyArray<Mode> = ["endless", "huge", "trickle", "hang"]

/**
 * An HTTPS receiver (test CA) that answers 200 and then: `endless` 16 KB
 * every 10 ms until the connection closes, `huge` 16 MB at once (svc reads
 * the first KiB and cuts the rest), `trickle` one byte every 200 ms, `hang`
 * headers never. Counts the requests.
 */
const hostileReceiver = async (hostile: Hostile) => {
  let requests = 0
  const chunk = Buffer.alloc(16 * 1024, "x")
  const huge = Buffer.alloc(16 * 1024 * 1024, "y")
  const server: Server = createHttpsServer({ cert: hostile.tls.cert, key: hostile.tls.key }, (request, response) => {
    requests++
    request.resume()
    const mode = (request.url ?? "/").split("/")[1] as Mode
    if (mode === "hang") return
    response.writeHead(200, { "content-type": "application/json" })
    if (mode === "huge") {
      response.end(huge)
      return
    }
    const every = mode === "endless" ? 10 : 200
    const timer = setInterval(() => response.write(mode === "endless" ? chunk : "z"), every)
    response.on("close", () => clearInterval(timer))
  })
  server.keepAliveTimeout = 1
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  return {
    url: (mode: Mode, suffix = "") => `https://127.0.0.1:${port}/${mode}/${suffix}`,
    requests: () => requests,
    close: () => {
      server.closeAllConnections()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}

/** A TCP server that answers every connection with `talk` (a broker that speaks garbage). */
const hostileBroker = async (talk: (socket: Socket) => void) => {
  const sockets = new Set<Socket>()
  const server: TcpServer = createTcpServer((socket) => {
    sockets.add(socket)
    socket.on("error", () => undefined)
    socket.on("close", () => sockets.delete(socket))
    talk(socket)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      for (const socket of sockets) socket.destroy()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}

/** Writes `bytes()` every 10 ms until the peer goes. */
const flood = (socket: Socket, bytes: () => Buffer) => {
  const timer = setInterval(() => socket.write(bytes()), 10)
  socket.on("close", () => clearInterval(timer))
}

/** Ten custom headers of the longest value allowed. */
const headers = (salt: string) =>
  Object.fromEntries(
    Array.from({ length: MAX_HEADERS }, (_, i) => [`X-Tenant-${i}`, `${salt}${i}`.padEnd(MAX_HEADER_VALUE, "v")])
  )

describe("webhooks, receivers, collectors and brokers at the limits", () => {
  let hostile: Hostile
  let receiver: Awaited<ReturnType<typeof hostileReceiver>>
  beforeAll(async () => {
    hostile = await startHostile()
    receiver = await hostileReceiver(hostile)
  })
  afterAll(async () => {
    await receiver?.close()
    await hostile?.stop()
  })

  const endpoint = (url: string, extra: Record<string, unknown> = {}) =>
    hostile.call(hostile.attacker, "POST", "/v1/notification-endpoints", {
      url,
      headers: headers(url.slice(-8)),
      ...extra
    })

  it("50 endpoints of 2 048-character URLs, 10 headers of 4 KiB and 50 filters on receivers that answer without end; 20 approvals and 50 test events", async () => {
    const filters = Array.from({ length: MAX_FILTERS }, (_, i) => `${`f${i}`.padEnd(125, "a")}.*`)
    filters[0] = "hostile.*"
    const ids: Array<string> = []
    for (let i = 0; i < MAX_ENDPOINTS; i++) {
      const base = receiver.url(MODES[i % MODES.length]!, `${i}/`)
      const created = await endpoint(base.padEnd(MAX_URL, "p"), { action_classes: filters })
      assert.strictEqual(created.status, 201, created.text)
      ids.push(created.json.endpoint.id)
    }
    const policy = await hostile.call(hostile.attacker, "PUT", "/v1/approval-policies/hostile.fanout", {
      mode: "require_approval",
      review_seconds: 900,
      expiring_notice_seconds: 0,
      timeout_action: "reject"
    })
    assert.strictEqual(policy.status, 200, policy.text)
    const session = await hostile.call(hostile.attacker, "POST", "/v1/agent-sessions", {})
    let answers: Array<Answer> = []
    const figures = await hostile.measure("webhooks to endless receivers, 50 endpoints", async () => {
      const before = receiver.requests()
      // 20 approvals: 1 000 deliveries to receivers that never finish their answers.
      for (let i = 0; i < 20; i++) {
        await hostile.call(hostile.attacker, "POST", `/v1/agent-sessions/${session.json.id}/steps`, {
          step_id: `fan-${i}`,
          tool: "t",
          action_class: "hostile.fanout",
          arguments: {}
        })
      }
      answers = await inParallel(
        ids.length,
        8,
        (i) => hostile.call(hostile.attacker, "POST", `/v1/notification-endpoints/${ids[i]}/test`, {})
      )
      // Until the receivers have had a few hundred requests, or 20 s.
      const until = performance.now() + 20_000
      while (receiver.requests() - before < 400 && performance.now() < until) {
        await new Promise((r) => setTimeout(r, 200))
      }
    })
    refusedOrServed(answers)
    passes(figures)
  })

  it("a telemetry destination of 10 headers of 4 KiB whose collector answers without end: 32 test spans and the organization's own spans", async () => {
    const created = await hostile.call(hostile.attacker, "POST", "/v1/telemetry-destinations", {
      url: receiver.url("endless", "v1/traces").padEnd(MAX_URL, "t"),
      headers: headers("collector")
    })
    assert.strictEqual(created.status, 201, created.text)
    const id = created.json.id ?? created.json.destination?.id
    let answers: Array<Answer> = []
    const figures = await hostile.measure("telemetry to an endless collector", async () => {
      answers = await inParallel(
        32,
        8,
        () => hostile.call(hostile.attacker, "POST", `/v1/telemetry-destinations/${id}/test`, {})
      )
      // The organization's own work makes spans for the same collector.
      await inParallel(
        64,
        8,
        (i) =>
          hostile.call(hostile.attacker, "POST", "/v1/tasks", { name: `span-${i}`, answer_schema: { type: "object" } })
      )
    })
    refusedOrServed(answers)
    passes(figures)
  })

  describe("broker addresses that answer with garbage", () => {
    it("an AMQP address that announces a 60 MB frame and sends it, and a NATS address whose INFO line never ends: 16 test events", async () => {
      // A method frame on channel 0 of 60 MB (amqplib takes frames up to 64 MiB), then its bytes.
      const frame = Buffer.from([1, 0, 0, 0x03, 0xc0, 0, 0])
      const body = Buffer.alloc(256 * 1024, 0xce)
      const amqp = await hostileBroker((socket) => {
        socket.write(frame)
        flood(socket, () => body)
      })
      const nats = await hostileBroker((socket) => {
        socket.write("INFO {\"server_id\":\"")
        flood(socket, () => Buffer.alloc(16 * 1024, "n"))
      })
      try {
        // Room for two more endpoints under SVC_MAX_ENDPOINTS_PER_ORG.
        const listed = await hostile.call(hostile.attacker, "GET", "/v1/notification-endpoints")
        for (const old of listed.json.endpoints.slice(0, 2)) {
          await hostile.call(hostile.attacker, "DELETE", `/v1/notification-endpoints/${old.id}`)
        }
        const made: Array<string> = []
        for (const url of [`amqp://127.0.0.1:${amqp.port}/?exchange=x`, `nats://127.0.0.1:${nats.port}?subject=x`]) {
          const created = await hostile.call(hostile.attacker, "POST", "/v1/notification-endpoints", { url })
          assert.strictEqual(created.status, 201, created.text)
          made.push(created.json.endpoint.id)
        }
        let answers: Array<Answer> = []
        const figures = await hostile.measure("broker addresses answering garbage", async () => {
          // A test event per endpoint is allowed 6 times a minute: the rest are 429s, cheap.
          answers = await inParallel(
            16,
            8,
            (i) => hostile.call(hostile.attacker, "POST", `/v1/notification-endpoints/${made[i % 2]}/test`, {})
          )
        })
        refusedOrServed(answers)
        passes(figures)
      } finally {
        await amqp.close()
        await nats.close()
      }
    })
  })
})
