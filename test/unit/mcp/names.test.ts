/**
 * The names the gateway lists tools under: `<server>__<tool>`, split back
 * at the first separator (server names cannot hold one), and the action
 * class each tool is governed as.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { McpServerName } from "../../../src/api/Mcp.ts"
import { actionClassOf, exposedName, type ServerRow, splitExposedName } from "../../../src/mcp/Servers.ts"

const server = (tools: Record<string, string>): ServerRow => ({
  id: "0192f4a0-7c1e-7a2b-9c3d-4e5f60718293",
  org_id: "0192f4a0-7c1e-7a2b-9c3d-4e5f60718294",
  name: "github",
  url_hint: "https://mcp.example.com/…/mcp",
  header_names: [],
  default_action_class: "mcp.github",
  tool_action_classes: tools,
  created_by: "key",
  created_at: "2026-11-28T09:00:00.000Z"
})

describe("gateway tool names", () => {
  it("a listed name splits back into its server and tool, a tool name holding the separator included", () => {
    assert.strictEqual(exposedName({ name: "github" }, "create__issue"), "github__create__issue")
    assert.deepStrictEqual(splitExposedName("github__create__issue"), { server: "github", tool: "create__issue" })
  })

  it("a name without a server or a tool is none", () => {
    for (const name of ["github", "__tool", "github__", ""]) assert.isUndefined(splitExposedName(name))
  })

  it("server names cannot hold the separator, upper case or a leading dash", () => {
    const valid = Schema.is(McpServerName)
    assert.isTrue(valid("github-2"))
    for (const name of ["a__b", "a_b", "GitHub", "-a", "a-", "x".repeat(33)]) assert.isFalse(valid(name), name)
  })

  it("a mapped tool is governed as its class, any other as the default; an inherited member is no mapping", () => {
    const row = server({ create_issue: "code.write" })
    assert.strictEqual(actionClassOf(row, "create_issue"), "code.write")
    assert.strictEqual(actionClassOf(row, "list_issues"), "mcp.github")
    assert.strictEqual(actionClassOf(row, "toString"), "mcp.github")
  })
})
