/**
 * A correction worker keeps each organization's known credentials under
 * their fingerprint: a request names the organization and the fingerprint
 * only, and the credentials travel once per worker and fingerprint (after
 * a `Missing` answer), never with every request.
 */
import { assert, describe, it } from "@effect/vitest"
import type { CorrectionReply, CorrectionRequest } from "../../../src/feedback/CorrectionWork.ts"
import { sha256Hex } from "../../../src/platform/Digest.ts"
import { makeWorkerPool } from "../../../src/platform/WorkerPool.ts"

type Request = CorrectionRequest extends infer R ? R extends { readonly id: number } ? Omit<R, "id"> : never : never

const WORKER = new URL("../../../src/feedback/correction-worker.ts", import.meta.url)
const KEY = `svc_${"k".repeat(43)}`
const document = { note: `use ${KEY} please` }

describe("known credentials are kept in the worker by fingerprint", () => {
  it("a request without credentials is answered Missing until they are sent once; then the fingerprint alone scrubs with them, and a new fingerprint asks again", async () => {
    const pool = makeWorkerPool<Request, CorrectionReply>(WORKER, { cacheEntries: 4 }, {
      workers: 1,
      timeoutMs: 5000,
      heapMb: 128,
      queueCapacity: 8
    })
    const send = (request: Request) =>
      new Promise<CorrectionReply>((resolve, reject) => {
        pool.submit("org-1", request, (outcome) =>
          outcome._tag === "Reply" ? resolve(outcome.reply) : reject(new Error(outcome._tag)))
      })
    try {
      const ref = { org: "org-1", fingerprint: "1" }
      const first = await send({ op: "scrub", document, known: ref, root: "" })
      assert.deepStrictEqual(first._tag === "Missing" && { schema: first.schema, known: first.known }, {
        schema: false,
        known: true
      })

      const withKnown = await send({
        op: "scrub",
        document,
        known: { ...ref, known: { keyHashes: [sha256Hex(KEY)], values: ["a-longer-secret-value"] } },
        root: ""
      })
      assert.strictEqual(withKnown._tag, "Scrubbed")

      // The fingerprint alone: the worker scrubs with what it keeps (the
      // organization's own value, which no rule would find by its shape).
      const kept = await send({ op: "scrub", document: { note: "x a-longer-secret-value y" }, known: ref, root: "" })
      assert.strictEqual(kept._tag, "Scrubbed")
      assert.deepStrictEqual(kept._tag === "Scrubbed" && kept.fields, ["note"])

      const moved = await send({ op: "scrub", document, known: { ...ref, fingerprint: "2" }, root: "" })
      assert.strictEqual(moved._tag, "Missing")
      const otherOrg = await send({ op: "scrub", document, known: { org: "org-2", fingerprint: "1" }, root: "" })
      assert.strictEqual(otherOrg._tag, "Missing")
    } finally {
      pool.close()
    }
  })
})
