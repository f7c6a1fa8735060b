/**
 * The "MCP servers" screen in a real browser, against an upstream MCP server
 * built with the official SDK on HTTPS loopback: each registered server with
 * its address hint and header names (never their values), its tools as the
 * server lists them, the name agents call each by and the action class it is
 * governed as, with what that class's policy does; a server that does not
 * answer says so under its own "List tools again" button.
 */
import { Effect, Exit, Scope } from "effect"
import { createServer } from "node:net"
import { afterAll, assert, beforeAll, it } from "vitest"
import { mcpUpstream } from "../support/mcpUpstream.ts"
import { screenshots } from "./layout.ts"
import { checkAccessibility, describeBrowser, signIn, startWorld, until, type World } from "./support.ts"

let world: World
const scope = Effect.runSync(Scope.make())

beforeAll(async () => {
  world = await startWorld("mcp-servers")
})
afterAll(async () => {
  await Effect.runPromise(Scope.close(scope, Exit.void))
  await world?.close()
})

/** A loopback port nothing listens on (taken, then given back). */
const closedPort = () =>
  new Promise<number>((resolve) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })

const policy = async (actionClass: string, mode: "allow" | "reject" | "require_approval") => {
  const put = await world.api("PUT", `/v1/approval-policies/${actionClass}`, {
    mode,
    review_seconds: 600,
    expiring_notice_seconds: 0,
    timeout_action: "reject"
  })
  assert.strictEqual(put.status, 200, JSON.stringify(put.body))
}

const register = async (body: Record<string, unknown>) => {
  const created = await world.api("POST", "/v1/mcp-servers", body)
  assert.strictEqual(created.status, 201, JSON.stringify(created.body))
}

describeBrowser("MCP servers", () => {
  it("lists each server with its tools, the names agents call them by and their action classes; a server that does not answer says so at its button", async () => {
    const upstream = await Effect.runPromise(mcpUpstream().pipe(Scope.provide(scope)))
    await register({
      name: "ops",
      url: upstream.url,
      headers: { Authorization: "Bearer upstream-secret-51c2" },
      default_action_class: "ops.read",
      tool_action_classes: { deploy: "ops.deploy", delete_all: "ops.danger", rollback: "ops.deploy" }
    })
    await register({ name: "offline", url: `https://127.0.0.1:${await closedPort()}/mcp` })
    await policy("ops.read", "allow")
    await policy("ops.deploy", "require_approval")
    await policy("ops.danger", "reject")

    const { page, done } = await world.open()
    await signIn(page, await world.link("admin", "Ada Admin"))
    await page.getByRole("navigation", { name: "Screens" }).getByRole("link", { name: "MCP servers" }).click()
    await page.getByRole("heading", { level: 1, name: "MCP servers" }).waitFor()
    const servers = page.getByRole("list", { name: "MCP servers" })
    // The page's heading comes before the list, which arrives with the servers in one answer.
    await servers.getByRole("heading", { level: 2 }).first().waitFor()
    assert.deepStrictEqual(await servers.getByRole("heading", { level: 2 }).allTextContents(), ["offline", "ops"])

    // The server that answers: its facts, then its tools as a person reads them, row by row.
    const ops = servers.getByRole("listitem").filter({ has: page.getByRole("heading", { name: "ops", exact: true }) })
    await ops.getByText("6 tools, listed in").waitFor()
    const facts = await ops.locator("dl.facts > div").evaluateAll((rows) =>
      rows.map((row) => [row.querySelector("dt")!.textContent, row.querySelector("dd")!.textContent])
    )
    assert.deepStrictEqual(facts.slice(1, 3), [["Headers", "Authorization"], ["Other tools governed as", "ops.read"]])
    assert.match(facts[0]![1]!, /^https:\/\/127\.0\.0\.1:\d+\/…/)
    assert.notInclude(await page.content(), "upstream-secret-51c2")
    const table = ops.getByRole("table", { name: "Tools" })
    assert.deepStrictEqual(await table.getByRole("columnheader").allTextContents(), [
      "Tool",
      "Agents call it as",
      "Governed as"
    ])
    const rows = await table.locator("tbody tr").evaluateAll((trs) =>
      trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => (td as HTMLElement).innerText.replace(/\s+/g, " ")))
    )
    assert.deepStrictEqual(rows, [
      ["echo The echo tool", "ops__echo", "ops.read (the server's default) allowed"],
      ["delete_all The delete_all tool", "ops__delete_all", "ops.danger refused"],
      ["deploy The deploy tool", "ops__deploy", "ops.deploy asks a person"],
      ["fail The fail tool", "ops__fail", "ops.read (the server's default) allowed"],
      ["hang The hang tool", "ops__hang", "ops.read (the server's default) allowed"],
      ["flood The flood tool", "ops__flood", "ops.read (the server's default) allowed"]
    ])
    // A mapping of a tool the server does not list is said, not hidden.
    await ops.getByText("Mapped but not listed by the server now: rollback → ops.deploy.").waitFor()
    // Each action class opens its policy.
    assert.strictEqual(
      await table.getByRole("link", { name: "ops.deploy" }).getAttribute("href"),
      "/console/policies?class=ops.deploy"
    )

    // The server that does not answer: said under its own button, which points at it; no list of tools.
    const offline = servers.getByRole("listitem").filter({
      has: page.getByRole("heading", { name: "offline", exact: true })
    })
    const error = offline.getByRole("alert")
    await until(async () => ((await error.textContent()) ?? "") !== "", "the offline server's error")
    assert.match(
      (await error.textContent())!,
      /^offline did not answer: .*connect.*\. Its tools are left out of what agents see until it answers\.$/
    )
    assert.strictEqual(await offline.getByRole("table").count(), 0)
    const again = offline.getByRole("button", { name: "List tools again" })
    assert.strictEqual(
      await again.getAttribute("aria-describedby"),
      await error.locator("p").getAttribute("id")
    )
    assert.strictEqual(await page.locator(".notice-slot .notice").count(), 0, "nothing at the top of the page")
    assert.include((await offline.locator("dl.facts").textContent())!, "mcp.offline")
    await checkAccessibility(page, "MCP servers")
    await screenshots(page, "mcp-servers")

    // Asked again, each server answers again: the list is the server's answer of now.
    await ops.getByRole("button", { name: "List tools again" }).click()
    await ops.getByText("6 tools, listed in").waitFor()
    await again.click()
    await until(async () => ((await error.textContent()) ?? "").startsWith("offline did not answer"), "the error again")
    assert.strictEqual(upstream.calls.length, 0, "listing tools calls none")
    await done()
  })
})
