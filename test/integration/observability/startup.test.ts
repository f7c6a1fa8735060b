/**
 * Operator settings the service cannot honour stop it at start
 * with a message naming the variable (a real `npm start` process).
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { runNode } from "../../support/process.ts"

describe("refused at start", () => {
  it("an OTLP protocol other than http/json, and a guessable metrics token, each with a message naming the variable", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "svc-otel-"))
    const base = { SVC_DATA_DIR: dataDir, DATABASE_URL: "", PORT: "0" }
    const grpc = await runNode("src/main.ts", [], {
      ...base,
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318",
      OTEL_EXPORTER_OTLP_PROTOCOL: "grpc"
    })
    assert.strictEqual(grpc.code, 1)
    assert.include(grpc.stdout + grpc.stderr, "OTEL_EXPORTER_OTLP_PROTOCOL: \"grpc\" is not supported")
    assert.include(grpc.stdout + grpc.stderr, "http/json")
    assert.notInclude(grpc.stdout + grpc.stderr, "svc listening")
    const token = await runNode("src/main.ts", [], { ...base, SVC_METRICS_TOKEN: "too-short" })
    assert.strictEqual(token.code, 1)
    assert.include(token.stdout + token.stderr, "SVC_METRICS_TOKEN must be at least 16 characters")
    assert.notInclude(token.stdout + token.stderr, "too-short")
  }, 120_000)
})
