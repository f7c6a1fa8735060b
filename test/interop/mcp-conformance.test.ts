/**
 * The MCP conformance suite (`@modelcontextprotocol/conformance`, its
 * `conformance server` command) against svc's `/mcp`, served on loopback
 * with one upstream server registered (the SDK's server of
 * `test/support/mcpUpstream.ts`), for the server features svc declares:
 * the lifecycle (`server-initialize`, `ping`), tools (`tools-list`) and
 * the transport's concurrent POST streams (`server-sse-multiple-streams`).
 * The suite cannot send svc's key, so it talks to a loopback proxy that
 * adds `Authorization: Bearer <key>` to every request and passes the rest
 * through unchanged.
 *
 * Not claimed, and why (docs/mcp.md, "Conformance"):
 * - `tools-call-*`, `json-schema-2020-12`, `elicitation-*`: they call tools
 *   of fixed names (`test_simple_text`, ...) that a conformance server
 *   implements; svc lists only its organization's upstream tools, each
 *   under `<server>__<tool>`, so no tool of svc bears those names.
 * - `logging-set-level`, `completion-complete`, `resources-*`,
 *   `prompts-*`: svc declares neither logging, completions, resources nor
 *   prompts.
 * - `server-sse-polling`: it fails nothing, but warns that the answer's
 *   stream has no priming event and no `retry` field: svc offers no
 *   resumable stream (`GET /mcp` is 405; a call that waits for a person is
 *   a task, or a bounded wait that says how to resume).
 * - `dns-rebinding-protection`: a rule for servers on localhost without
 *   authentication; svc is a network service that authenticates every
 *   request by key, whatever its Host header.
 *
 * The suite (about 30 MB) is this folder's own npm project (interop.ts):
 * `npm run test:interop` installs it and runs this file. Without it `npm
 * test` skips the file and says so; under CI it runs.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { execFile } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync } from "node:fs"
import { createServer, request } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SvcTest } from "../../src/testing.ts"
import { mcpUpstream } from "../support/mcpUpstream.ts"
import { loopbackTargets, TestTls } from "../support/tls.ts"
import { interopRequire, packageDir, runs } from "./interop.ts"

const installed = runs("mcp-conformance.test.ts", "the MCP conformance suite", "@modelcontextprotocol/conformance")

/** The scenarios of the server features svc declares (see the top of this file for the others). */
const CLAIMED = ["server-initialize", "ping", "tools-list", "server-sse-multiple-streams"] as const

const service = Layer.unwrap(Effect.gen(function*() {
  const tls = yield* TestTls.shared
  return SvcTest.layer({ config: loopbackTargets(tls) })
}))

/** A loopback proxy to `target` that adds the key to every request; answers its `/mcp` URL. */
const keyProxy = (target: string, key: string) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ url: string; close: () => void }>((resolve) => {
        const to = new URL(target)
        const server = createServer((req, res) => {
          const forwarded = request({
            host: to.hostname,
            port: to.port,
            path: req.url,
            method: req.method,
            headers: { ...req.headers, authorization: `Bearer ${key}` }
          }, (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers)
            answer.pipe(res)
          })
          forwarded.on("error", () => res.destroy())
          req.pipe(forwarded)
        })
        server.listen(0, "127.0.0.1", () =>
          resolve({
            url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
            close: () => {
              server.closeAllConnections()
              server.close()
            }
          }))
      })
    ),
    (proxy) => Effect.sync(proxy.close)
  )

interface Check {
  readonly id: string
  readonly status: string
  readonly errorMessage?: string
}

/** Runs one scenario of `conformance server` against `url`; answers its checks. */
const conformance = (url: string, scenario: string) =>
  Effect.promise(() =>
    new Promise<{ checks: ReadonlyArray<Check>; output: string }>((resolve) => {
      const cli = join(packageDir(interopRequire, "@modelcontextprotocol/conformance"), "dist/index.js")
      const out = mkdtempSync(join(tmpdir(), "svc-mcp-conformance-"))
      execFile(
        process.execPath,
        [cli, "server", "--url", url, "--scenario", scenario, "-o", out],
        { timeout: 120_000, env: { ...process.env, NO_COLOR: "1" } },
        (_error, stdout, stderr) => {
          const checks: Array<Check> = []
          const walk = (dir: string): void => {
            for (const entry of readdirSync(dir, { withFileTypes: true })) {
              const path = join(dir, entry.name)
              if (entry.isDirectory()) walk(path)
              else if (entry.name === "checks.json") {
                checks.push(...JSON.parse(readFileSync(path, "utf8")) as Array<Check>)
              }
            }
          }
          walk(out)
          resolve({ checks, output: `${stdout}\n${stderr}` })
        }
      )
    })
  )

layer(service, { excludeTestServices: true })("the MCP conformance suite against svc's /mcp", (it) => {
  describe.skipIf(!installed)("the server features svc declares", () => {
    it.effect(`${CLAIMED.join(", ")}: every check passes, none warns`, () =>
      Effect.scoped(Effect.gen(function*() {
        const svc = yield* SvcTest
        const upstream = yield* mcpUpstream()
        const org = yield* SvcTest.org()
        yield* org.client.mcpServers.create({ payload: { name: "tools", url: upstream.url } })
        const proxy = yield* keyProxy(svc.baseUrl, org.key)
        for (const scenario of CLAIMED) {
          const { checks, output } = yield* conformance(proxy.url, scenario)
          assert.isAbove(checks.length, 0, `${scenario}: no checks ran\n${output}`)
          const failed = checks.filter((check) => check.status !== "SUCCESS" && check.status !== "INFO")
          assert.deepStrictEqual(failed, [], `${scenario}\n${output}`)
        }
      })), 300_000)
  })
})
