/**
 * The receiver kit README's Node sample runs as a newcomer runs it: saved
 * as `server.mjs` in a project `npm init -y` made (`"type": "commonjs"`),
 * with the kit installed, on the Node running the tests. It serves HTTPS
 * (svc delivers to nothing else), answers 202 to a delivery svc signed and
 * saves it to its inbox (0600), once per event id, and 400 to a bad
 * signature. Its port is the test's own (8787 becomes a free one).
 */
import { assert, describe, it } from "@effect/vitest"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as https from "node:https"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { newSigningSecret, signatureHeader } from "../../../src/notifications/send/Signing.ts"
import { codeBlocks, read } from "../../support/markdown.ts"
import { root } from "../../support/process.ts"
import { eventBody } from "../../support/receiverVectors.ts"
import { makeTestTls } from "../../support/tls.ts"

const page = "packages/receiver/README.md"

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

const post = (port: number, ca: string, body: string, signature: string) =>
  new Promise<number>((resolve, reject) => {
    const request = https.request({
      host: "127.0.0.1",
      port,
      method: "POST",
      path: "/",
      ca,
      headers: { "x-svc-signature": signature }
    }, (response) => {
      response.resume()
      resolve(response.statusCode ?? 0)
    })
    request.on("error", reject)
    request.end(body)
  })

describe("the receiver kit README's Node sample", () => {
  it(
    "runs as server.mjs in a project npm init -y made: 202 and saved once for a signed delivery, 400 for a bad signature",
    async () => {
      const text = read(page)
      const section = text.slice(text.indexOf("\n## Node\n"), text.indexOf("\n## ", text.indexOf("\n## Node\n") + 1))
      const sample = codeBlocks(page, section).find((block) => block.lang === "js")
      assert.isDefined(sample, "a js block under ## Node")

      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "svc-receiver-node-"))
      const init = spawnSync("npm", ["init", "-y"], { cwd: dir, encoding: "utf8" })
      assert.strictEqual(init.status, 0, init.stderr)
      assert.strictEqual(JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")).type, "commonjs")
      // The kit as installed: its package (built dist/) under node_modules.
      fs.mkdirSync(path.join(dir, "node_modules/@svc"), { recursive: true })
      fs.symlinkSync(path.join(root, "packages/receiver"), path.join(dir, "node_modules/@svc/receiver"))
      const port = await freePort()
      fs.writeFileSync(
        path.join(dir, "server.mjs"),
        sample!.code.replace(".listen(8787)", `.listen(${port}, "127.0.0.1")`)
      )
      const tls = await makeTestTls()
      fs.writeFileSync(path.join(dir, "cert.pem"), tls.cert)
      fs.writeFileSync(path.join(dir, "key.pem"), tls.key)
      const secret = newSigningSecret()
      const server: ChildProcess = spawn(process.execPath, ["server.mjs"], {
        cwd: dir,
        env: { ...process.env, TLS_CERT: "cert.pem", TLS_KEY: "key.pem", SVC_WEBHOOK_SECRET: secret },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      server.stdout!.on("data", (chunk) => (output += chunk))
      server.stderr!.on("data", (chunk) => (output += chunk))
      try {
        const body = eventBody()
        const now = Math.floor(Date.now() / 1000)
        let status = 0
        for (let tries = 0; tries < 100 && status === 0; tries++) {
          status = await post(port, tls.caCert, body, signatureHeader([secret], now, body)).catch(async () => {
            await new Promise((resolve) => setTimeout(resolve, 100))
            return 0
          })
        }
        assert.strictEqual(status, 202, output)
        assert.strictEqual(await post(port, tls.caCert, body, signatureHeader([secret], now, body)), 202, output)
        assert.strictEqual(await post(port, tls.caCert, body, `t=${now},v1=${"0".repeat(64)}`), 400, output)
        const inbox = path.join(dir, "inbox.jsonl")
        assert.deepStrictEqual(fs.readFileSync(inbox, "utf8").trim().split("\n").map((line) => JSON.parse(line).id), [
          JSON.parse(body).id
        ])
        assert.strictEqual(fs.statSync(inbox).mode & 0o777, 0o600)
      } finally {
        server.kill("SIGKILL")
      }
    },
    60_000
  )
})
