/**
 * The arms of the webhook scenarios (`scenarios/webhooks.ts`,
 * `scenarios/webhooks-scale.ts`): svc draining a backlog of approval events
 * committed to its outbox, the bare undici sender and graphile-worker
 * sending the same signed POST to the same receiver, and the rates read
 * from the receipts.
 *
 * svc's backlog is committed the way svc's own writes commit events: rows
 * of `events` in one transaction, then one governed step through the API
 * (one more event, and svc's own wakeup of its dispatcher). The
 * dispatcher's fan-out (events into deliveries) is inside the measured CPU
 * on both databases:
 *
 * - server: the CPU window opens before the transaction commits (the
 *   dispatcher cannot see the events before), and the producer's own
 *   backend is left out of PostgreSQL's figure (its write is not the
 *   delivery's cost);
 * - embedded: the data folder has one owner, so the events are committed
 *   while svc is stopped and svc's dispatcher starts on them while svc is
 *   still starting (it answers `/ready` once its workers run). svc's CPU is
 *   then its process's whole CPU at the last receipt minus what a start with
 *   nothing to do costs (the mean of two idle restarts just before, read
 *   at `/ready`): start-up is not counted, the fan-out is, and every
 *   delivery counts. The idle starts' spread is the figure's uncertainty
 *   (reported by the scenarios).
 */
import { createHash, randomBytes } from "node:crypto"
import * as path from "node:path"
import { v7 } from "uuid"
import { type Child, spawnChild } from "./child.ts"
import { cpuMicros, measureCpu, type Meter, meterOf } from "./cpu.ts"
import { type BenchClient, freshDatabase } from "./db.ts"
import { approvalEvent, type OutboxEvent } from "./events.ts"
import type { Receipts } from "./receiver.ts"
import { type BenchContext, SEND_CONCURRENCY } from "./scenario.ts"
import { startSvc, type SvcCheckout, type SvcProcess } from "./svc.ts"
import { type Work, workDelta } from "./work.ts"

export const now = () => performance.timeOrigin + performance.now()
/** The longest one drain may take (100 000 deliveries on a busy embedded database). */
const TIMEOUT_MS = 1_200_000
/** Idle starts whose mean CPU stands for svc's start-up on the embedded database. */
const IDLE_STARTS = 2

export interface ArmResult {
  readonly arm: string
  /** Deliveries the CPU figures are divided by (svc: the backlog and the wake-up step's). */
  readonly deliveries: number
  /** When the clock started: the commit (server), `/ready` (embedded), the first send (bare sender). */
  readonly t0: number
  readonly receipts: Receipts
  /** µs by process. */
  readonly cpu: Record<string, number>
  /** Database work by source (`work.ts`), where it was counted. */
  readonly work?: Record<string, Work | undefined>
  /** Embedded svc: the CPU of idle starts (µs); their mean is left out of svc's figure. */
  readonly idleStarts?: ReadonlyArray<number>
}

export const rates = (r: ArmResult) => ({
  average: r.receipts.count / ((r.receipts.last - r.t0) / 1000),
  steady: (0.6 * r.receipts.count) / ((r.receipts.p80 - r.receipts.p20) / 1000),
  firstQuarter: (0.25 * r.receipts.count) / ((r.receipts.p25 - r.receipts.first) / 1000),
  lastQuarter: (0.25 * r.receipts.count) / ((r.receipts.last - r.receipts.p75) / 1000),
  firstMs: r.receipts.first - r.t0
})

/** CPU µs per delivery of one process of an arm. */
export const cpuPer = (r: ArmResult, process: string) => (r.cpu[process] ?? NaN) / r.deliveries

const APPROVAL_TYPES = [
  "approval.requested",
  "approval.expiring",
  "approval.escalated",
  "approval.approved",
  "approval.rejected",
  "approval.expired"
] as const

/**
 * Where svc's deliveries go: `orgs` organizations with `endpointsPerOrg`
 * endpoints each, all at the receiver (one path, told apart by a query),
 * endpoint j of each organization at the loopback address 127.0.0.(1 + j
 * mod `hosts`) (default 1: all at 127.0.0.1). With `hosts` as large as
 * `endpointsPerOrg`, every endpoint is a host of its own for svc, which
 * keeps a pool of connections per organization and host, as distinct
 * receivers would be.
 * `all`: every endpoint subscribes to `approval.requested`, so each event
 * is delivered to every endpoint of its organization (the queue study's
 * shape: 16 endpoints of one organization). `one`: the organization's
 * endpoint j subscribes to the j-th approval event type only and events
 * take the types in turn, so each event is delivered once whatever the
 * number of endpoints (the dispatcher's work per delivery stays the same).
 */
export interface Topology {
  readonly orgs: number
  readonly endpointsPerOrg: number
  readonly fanOut: "all" | "one"
  readonly hosts?: number
}

/** Loopback addresses the receiver listens on (`receiver.ts`), all on one port; a topology's `hosts` at most this. */
export const RECEIVER_ADDRESSES = 8

/** The receiver's origin at its k-th address (k from 0: 127.0.0.1, 127.0.0.2, ...). */
export const originAt = (receiverUrl: string, k: number) => receiverUrl.replace("://127.0.0.1:", `://127.0.0.${1 + k}:`)

/** Each endpoint's origin, endpoint j of organization i at index j * orgs + i (the order the `one` fan-out's events take them in). */
export const endpointOrigins = (topology: Topology, receiverUrl: string) =>
  Array.from(
    { length: topology.orgs * topology.endpointsPerOrg },
    (_, n) => originAt(receiverUrl, Math.floor(n / topology.orgs) % (topology.hosts ?? 1))
  )

export const ONE_ENDPOINT: Topology = { orgs: 1, endpointsPerOrg: 1, fanOut: "one" }

/** The events making (about) `deliveries` deliveries over `orgIds`, and how many deliveries they make. */
const eventPlan = (topology: Topology, orgIds: ReadonlyArray<string>, deliveries: number) => {
  if (topology.fanOut === "all") {
    const events = Math.max(1, Math.round(deliveries / topology.endpointsPerOrg))
    return {
      deliveries: events * topology.endpointsPerOrg,
      event: (k: number) => ({ orgId: orgIds[k % orgIds.length]!, type: APPROVAL_TYPES[0] })
    }
  }
  if (topology.endpointsPerOrg > APPROVAL_TYPES.length) {
    throw new Error(`at most ${APPROVAL_TYPES.length} endpoints per organization with fanOut "one"`)
  }
  return {
    deliveries,
    event: (k: number) => ({
      orgId: orgIds[k % orgIds.length]!,
      type: APPROVAL_TYPES[Math.floor(k / orgIds.length) % topology.endpointsPerOrg]!
    })
  }
}

/** Deliveries of the wake-up step's `approval.requested` in the first organization. */
const wakeupDeliveries = (topology: Topology) => topology.fanOut === "all" ? topology.endpointsPerOrg : 1

/** Inserts `count` events (`event(k)` says whose and which type) through `client`, 2 000 a statement; the caller commits. */
export const insertEvents = async (
  client: BenchClient,
  count: number,
  event: (k: number) => { orgId: string; type: string }
) => {
  for (let i = 0; i < count; i += 2_000) {
    const batch: Array<OutboxEvent & { orgId: string; type: string }> = []
    for (let k = i; k < Math.min(count, i + 2_000); k++) {
      const { orgId, type } = event(k)
      batch.push({ ...approvalEvent(orgId, type), orgId, type })
    }
    await client.query(
      `INSERT INTO events (id, org_id, type, occurred_at, body)
       SELECT id, org_id, type, now(), body FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[]) AS e (id, org_id, type, body)`,
      [batch.map((e) => e.id), batch.map((e) => e.orgId), batch.map((e) => e.type), batch.map((e) => e.body)]
    )
  }
}

/** Runs `f` on `items`, `limit` at a time. */
const eachLimited = async <A>(items: ReadonlyArray<A>, limit: number, f: (item: A) => Promise<unknown>) => {
  let next = 0
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await f(items[next++]!)
  }))
}

const sha256Hex = (value: string) => createHash("sha256").update(value, "utf8").digest("hex")

export interface SvcArmOptions {
  /** Names the database, the log file and the receiver's path. */
  readonly name: string
  /** The arm's label in the tables. */
  readonly arm: string
  readonly topology: Topology
  readonly warmup: number
  readonly deliveries: number
}

/**
 * svc from `checkout` on a fresh database: provisioned (the first
 * organization by the CLI, the others, with a key each, written to the
 * database directly, the endpoints through the API), a warm-up drain of
 * `warmup` deliveries, then the measured drain of `deliveries`.
 */
export const svcArm = async (
  context: BenchContext,
  checkout: SvcCheckout,
  receiver: Child,
  receiverUrl: string,
  options: SvcArmOptions
): Promise<ArmResult> => {
  const { topology } = options
  const database = await freshDatabase(context.database, `${options.name}_${checkout.label}`)
  const start = () =>
    startSvc(checkout, database, {
      SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8",
      SVC_EXTRA_CA_FILE: context.tls.caFile,
      SVC_WEBHOOK_QUEUE_CAPACITY: "1000000"
    }, path.join(context.logDir, `${options.name}-${checkout.label}-${context.database}.log`))
  let svc: SvcProcess | undefined
  // A client of the database's own: on the embedded database only while svc is stopped.
  const withClient = async <A>(f: (client: BenchClient) => Promise<A>) => {
    if (database.offline) await svc!.stop()
    const client = await database.connect()
    try {
      return await f(client)
    } finally {
      await client.end()
      if (database.offline) svc = await start()
    }
  }
  try {
    svc = await start()
    const first = await svc.provision()
    const orgs = [first]
    if (topology.orgs > 1) {
      const more = Array.from(
        { length: topology.orgs - 1 },
        () => ({ orgId: v7(), key: `svc_${randomBytes(32).toString("base64url")}` })
      )
      const hashes = more.map((o) => sha256Hex(o.key))
      await withClient(async (client) => {
        await client.query("INSERT INTO orgs (id, name) SELECT id, 'bench' FROM unnest($1::uuid[]) AS id", [
          more.map((o) => o.orgId)
        ])
        await client.query(
          `INSERT INTO api_keys (id, org_id, name, key_hash, key_prefix, scopes)
           SELECT gen_random_uuid(), org_id, 'bench', key_hash, key_prefix, $4::text[]
           FROM unnest($1::uuid[], $2::text[], $3::text[]) AS k (org_id, key_hash, key_prefix)`,
          [more.map((o) => o.orgId), hashes, more.map((o) => o.key.slice(0, 12)), [
            "org_config.read",
            "org_config.write"
          ]]
        )
      })
      orgs.push(...more)
    }
    const route = `/${options.name}-${checkout.label}-${context.database}`
    const endpoints = orgs.flatMap((org, i) =>
      Array.from({ length: topology.endpointsPerOrg }, (_, j) => ({
        key: org.key,
        url: `${originAt(receiverUrl, j % (topology.hosts ?? 1))}${route}?e=${i}.${j}`,
        events: [topology.fanOut === "all" ? APPROVAL_TYPES[0] : APPROVAL_TYPES[j]!]
      }))
    )
    await eachLimited(
      endpoints,
      8,
      (e) => svc!.api(e.key, "POST", "/v1/notification-endpoints", { url: e.url, events: e.events })
    )
    const orgIds = orgs.map((o) => o.orgId)
    const session = await svc.api<{ id: string }>(first.key, "POST", "/v1/agent-sessions", {})
    let step = 0
    // A governed step without a policy opens an approval: one more event, and svc's own wakeup of its dispatcher.
    const wakeup = () =>
      svc!.api(first.key, "POST", `/v1/agent-sessions/${session.id}/steps`, {
        step_id: `burst-${step++}`,
        tool: "bench",
        action_class: "bench.burst",
        arguments: {}
      })

    const drain = async (size: number, metered: boolean) => {
      const plan = eventPlan(topology, orgIds, size)
      const events = topology.fanOut === "all" ? plan.deliveries / topology.endpointsPerOrg : plan.deliveries
      const expected = plan.deliveries + wakeupDeliveries(topology)
      await receiver.call("reset", { path: route })
      const receipts = () => receiver.call<Receipts>("wait", { path: route, count: expected, timeoutMs: TIMEOUT_MS })
      if (database.offline) {
        // What a start with nothing to do costs: the mean of two, read at /ready.
        const idleStarts: Array<number> = []
        while (metered && idleStarts.length < IDLE_STARTS) {
          await svc!.stop()
          svc = await start()
          idleStarts.push(svc.cpu())
        }
        const startupMicros = idleStarts.length === 0 ? 0 : idleStarts.reduce((a, b) => a + b, 0) / idleStarts.length
        await svc!.stop()
        const receiverBefore = cpuMicros(receiver.pid)
        const client = await database.connect()
        try {
          await client.query("BEGIN")
          await insertEvents(client, events, plan.event)
          await client.query("COMMIT")
        } finally {
          await client.end()
        }
        svc = await start()
        const workBefore = await svc.meter.work?.read()
        const t0 = now()
        await wakeup()
        const result = await receipts()
        const cpu = { [checkout.label]: svc.cpu() - startupMicros, receiver: cpuMicros(receiver.pid) - receiverBefore }
        const work = { [checkout.label]: workDelta(workBefore, await svc.meter.work?.read()) }
        return {
          arm: options.arm,
          deliveries: expected,
          t0,
          receipts: result,
          cpu,
          work,
          idleStarts
        } satisfies ArmResult
      }
      const client = await database.connect()
      try {
        const [{ pid: producer }] = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows as [
          { pid: number }
        ]
        const postgres: Meter = {
          ...database.meter!,
          pids: async () => (await database.meter!.pids()).filter((pid) => pid !== producer)
        }
        await client.query("BEGIN")
        await insertEvents(client, events, plan.event)
        const meters = metered ? [svc!.meter, meterOf("receiver", receiver.pid), postgres] : []
        const { result, cpu, work } = await measureCpu(meters, async () => {
          await client.query("COMMIT")
          const t0 = now()
          await wakeup()
          return { t0, receipts: await receipts() }
        })
        return { arm: options.arm, deliveries: expected, ...result, cpu, work } satisfies ArmResult
      } finally {
        await client.end()
      }
    }
    await drain(options.warmup, false)
    return await drain(options.deliveries, true)
  } finally {
    await svc?.stop()
    await database.drop()
  }
}

/**
 * The bare undici sender (`baselines/bare-sender.ts`): `warmup` then `count` events from memory; its clock starts at its first send.
 * With `topology`, a pool per endpoint at the endpoint's host, events taking the endpoints in turn (svc's pools, one per organization and host).
 */
export const bareArm = async (
  context: BenchContext,
  receiver: Child,
  receiverUrl: string,
  options: { arm: string; warmup: number; count: number; topology?: Topology }
): Promise<ArmResult> => {
  const sender = await spawnChild("bare-sender", new URL("../baselines/bare-sender.ts", import.meta.url))
  try {
    const origins = options.topology === undefined ? undefined : endpointOrigins(options.topology, receiverUrl)
    await sender.call("start", { origin: receiverUrl, origins, ca: context.tls.caCert, connections: SEND_CONCURRENCY })
    const route = `/bare-${context.database}${origins === undefined ? "" : `-${origins.length}`}`
    const orgId = "01900000-0000-7000-8000-000000000001"
    const burst = async (count: number, meters: ReadonlyArray<Meter>) => {
      await receiver.call("reset", { path: route })
      await sender.call("prepare", { orgId, count })
      return measureCpu(meters, async () => {
        const { started } = await sender.call<{ started: number }>("burst", { path: route, secret: "whsec_bench" })
        return {
          t0: started,
          receipts: await receiver.call<Receipts>("wait", { path: route, count, timeoutMs: TIMEOUT_MS })
        }
      })
    }
    await burst(options.warmup, [])
    const { result, cpu } = await burst(options.count, [
      meterOf("bare sender", sender.pid),
      meterOf("receiver", receiver.pid)
    ])
    await sender.call("close")
    return { arm: options.arm, deliveries: options.count, ...result, cpu }
  } finally {
    await sender.stop()
  }
}

/**
 * graphile-worker (`baselines/graphile.ts`, server only): `warmup` then
 * `count` jobs added by `add_jobs` in one transaction (5 000 a statement),
 * the CPU window opened before it commits, the producer's backend left out.
 */
export const graphileArm = async (
  context: BenchContext,
  receiver: Child,
  receiverUrl: string,
  options: { arm: string; warmup: number; count: number }
): Promise<ArmResult> => {
  const database = await freshDatabase("postgres", "graphile")
  const route = "/graphile"
  const worker = await spawnChild("graphile", new URL("../baselines/graphile.ts", import.meta.url))
  const client = await database.connect()
  try {
    await worker.call("start", {
      connectionString: database.url,
      origin: receiverUrl,
      ca: context.tls.caCert,
      concurrency: SEND_CONCURRENCY,
      path: route,
      secret: "whsec_bench"
    })
    const orgId = "01900000-0000-7000-8000-000000000001"
    const [{ pid: producer }] = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows as [
      { pid: number }
    ]
    const postgres: Meter = {
      ...database.meter!,
      pids: async () => (await database.meter!.pids()).filter((pid) => pid !== producer)
    }
    const burst = async (count: number, meters: ReadonlyArray<Meter>) => {
      await receiver.call("reset", { path: route })
      await client.query("BEGIN")
      for (let i = 0; i < count; i += 5_000) {
        const specs = Array.from(
          { length: Math.min(5_000, count - i) },
          () => ({ identifier: "send", payload: approvalEvent(orgId) })
        )
        await client.query(
          "SELECT count(*) FROM graphile_worker.add_jobs(array(SELECT json_populate_recordset(null::graphile_worker.job_spec, $1::json)), false)",
          [JSON.stringify(specs)]
        )
      }
      return measureCpu(meters, async () => {
        await client.query("COMMIT")
        const t0 = now()
        return { t0, receipts: await receiver.call<Receipts>("wait", { path: route, count, timeoutMs: TIMEOUT_MS }) }
      })
    }
    await burst(options.warmup, [])
    const { result, cpu, work } = await burst(options.count, [
      meterOf("graphile-worker", worker.pid),
      meterOf("receiver", receiver.pid),
      postgres
    ])
    await worker.call("close")
    return { arm: options.arm, deliveries: options.count, ...result, cpu, work }
  } finally {
    await client.end()
    await worker.stop()
    await database.drop()
  }
}

/** The receiver, a process of its own, for the duration of `f`. */
export const withReceiver = async <A>(
  context: BenchContext,
  f: (receiver: Child, receiverUrl: string) => Promise<A>
) => {
  const receiver = await spawnChild("receiver", new URL("./receiver.ts", import.meta.url), {
    BENCH_TLS_CERT: context.tls.cert,
    BENCH_TLS_KEY: context.tls.key,
    BENCH_RECEIVER_ADDRESSES: String(RECEIVER_ADDRESSES),
    BENCH_RECEIVER_KEEPALIVE_MS: process.env.BENCH_RECEIVER_KEEPALIVE_MS ?? "5000"
  })
  try {
    return await f(receiver, await receiver.call<string>("url"))
  } finally {
    await receiver.stop()
  }
}

/** Embedded svc: the idle starts' CPU, e.g. `idle start 1 210–1 290 ms`, for the notes. */
export const idleStartNote = (r: ArmResult) =>
  r.idleStarts === undefined || r.idleStarts.length === 0
    ? ""
    : `idle start ${Math.round(Math.min(...r.idleStarts) / 1000)}–${Math.round(Math.max(...r.idleStarts) / 1000)} ms`
