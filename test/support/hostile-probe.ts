/**
 * The other organization of the hostile-tenant suite (`hostile.ts`), in a
 * process of its own so that the attack's client side (large bodies sent,
 * receivers answering svc) does not delay its clock: sends
 * `GET /v1/agent-approvals?limit=1` with `PROBE_KEY` to `PROBE_URL` every
 * 100 ms (after one not counted, then `ready` on a line of its own), each
 * on time whether or not the one before has answered, until a line arrives
 * on stdin; then waits for those
 * in flight and prints their latencies in ms as one JSON array. A request that fails or is not
 * answered within `PROBE_TIMEOUT_MS` counts as that long.
 */
const url = `${process.env.PROBE_URL}/v1/agent-approvals?limit=1`
const headers = { authorization: `Bearer ${process.env.PROBE_KEY}` }
const timeoutMs = Number(process.env.PROBE_TIMEOUT_MS ?? 15_000)

const once = async (): Promise<number> => {
  const started = performance.now()
  try {
    const response = await fetch(url, { headers, signal: AbortSignal.timeout(timeoutMs) })
    await response.arrayBuffer()
    return response.status === 200 ? performance.now() - started : timeoutMs
  } catch {
    return timeoutMs
  }
}

// One request not counted: the first of a process opens its connection and loads the client.
await once()
process.stdout.write("ready\n")
const latencies: Array<Promise<number>> = [once()]
const timer = setInterval(() => latencies.push(once()), 100)
process.stdin.once("data", async () => {
  clearInterval(timer)
  process.stdout.write(`${JSON.stringify((await Promise.all(latencies)).map(Math.round))}\n`)
  process.exit(0)
})
