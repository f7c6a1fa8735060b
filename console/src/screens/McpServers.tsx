/**
 * "MCP servers": the organization's upstream MCP servers, which agents reach
 * through svc's `/mcp`, and for each its tools as the gateway lists them,
 * with the action class every call of a tool is governed as and what that
 * class's policy does with it. The tools are the server's own answer (the
 * API's test call connects to it when the screen opens, and again on
 * "List tools again"); a server that does not answer says so under its
 * button. Registering and removing servers is done through the API.
 */
import { useMemo } from "preact/hooks"
import type { McpServer } from "../../../src/api/Mcp.ts"
import type { Policy } from "../../../src/api/Policies.ts"
import { problemOf, SvcApi } from "../api.ts"
import { refresh, useAtomValue } from "../atoms.ts"
import { describeProblem, Loaded, Time } from "../ui.tsx"

const serversAtom = SvcApi.query("mcpServers", "list", { reactivityKeys: ["mcp-servers"] })
const policiesAtom = SvcApi.query("approvalPolicies", "list", { reactivityKeys: ["policies"] })

export const McpServers = () => {
  const servers = useAtomValue(serversAtom)
  const policies = useAtomValue(policiesAtom)
  const byClass = policies._tag === "Success"
    ? new Map(policies.value.policies.map((policy) => [policy.action_class, policy]))
    : undefined
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title" tabIndex={-1}>MCP servers</h1>
      <p class="muted">
        Agents reach these servers' tools through svc's MCP endpoint (<code>/mcp</code>), each tool listed as{" "}
        <code>server__tool</code>. Every call is a governed step of the tool's action class: its policy allows it, refuses it or
        asks a person. Servers are registered and removed through the API (<code>/v1/mcp-servers</code>).
      </p>
      <Loaded result={servers} what="the MCP servers">
        {(value) =>
          value.mcp_servers.length === 0
            ? <p class="empty">No MCP servers registered yet.</p>
            : (
              <ul class="cards" aria-label="MCP servers">
                {value.mcp_servers.map((server) => <Server key={server.id} server={server} policies={byClass} />)}
              </ul>
            )}
      </Loaded>
    </section>
  )
}

/** What the policy of an action class does with a call, in words; `undefined` while the policies load. */
const governs = (policies: ReadonlyMap<string, Policy> | undefined, actionClass: string): string | undefined => {
  if (policies === undefined) return undefined
  const policy = policies.get(actionClass)
  if (policy === undefined) return "asks a person (no policy)"
  const rules = policy.rules.length === 0 ? "" : `, after ${policy.rules.length} rule${policy.rules.length === 1 ? "" : "s"}`
  switch (policy.mode) {
    case "allow":
      return `allowed${rules}`
    case "reject":
      return `refused${rules}`
    default:
      return `asks a person${rules}`
  }
}

const Server = ({ server, policies }: { server: McpServer; policies: ReadonlyMap<string, Policy> | undefined }) => {
  const testAtom = useMemo(() => SvcApi.query("mcpServers", "test", { params: { id: server.id } }), [server.id])
  const tested = useAtomValue(testAtom)
  const titleId = `mcp-server-${server.id}`
  const toolsId = `mcp-tools-${server.id}`
  const errorId = `mcp-tools-error-${server.id}`
  const mapped = Object.entries(server.tool_action_classes)
  const listed = tested._tag === "Success" ? new Set(tested.value.tools.map((tool) => tool.name)) : undefined
  const unlisted = listed === undefined ? [] : mapped.filter(([tool]) => !listed.has(tool))
  const problem = tested._tag === "Failure" ? problemOf(tested.cause) : undefined
  const loading = tested._tag === "Initial" || tested.waiting
  return (
    <li class="card" aria-labelledby={titleId}>
      <h2 id={titleId}>{server.name}</h2>
      <dl class="facts">
        <div><dt>Address</dt><dd>{server.url_hint}</dd></div>
        <div><dt>Headers</dt><dd>{server.headers.length === 0 ? "none" : server.headers.join(", ")}</dd></div>
        <div><dt>Other tools governed as</dt><dd><code>{server.default_action_class}</code></dd></div>
        <div><dt>Registered</dt><dd><Time iso={server.created_at} /></dd></div>
      </dl>
      <h3 id={toolsId}>Tools</h3>
      {tested._tag === "Success" && (
        tested.value.tools.length === 0
          ? <p class="empty">The server lists no tools.</p>
          : (
            <div class="table-wrap">
              <table aria-labelledby={toolsId}>
                <thead>
                  <tr><th scope="col">Tool</th><th scope="col">Agents call it as</th><th scope="col">Governed as</th></tr>
                </thead>
                <tbody>
                  {tested.value.tools.map((tool) => {
                    const effect = governs(policies, tool.action_class)
                    return (
                      <tr key={tool.name}>
                        <td data-label="Tool">
                          <code>{tool.name}</code>
                          {tool.description !== undefined && <div class="muted">{tool.description}</div>}
                        </td>
                        <td data-label="Agents call it as"><code>{tool.exposed_as}</code></td>
                        <td data-label="Governed as">
                          <a href={`/console/policies?class=${encodeURIComponent(tool.action_class)}`}>{tool.action_class}</a>
                          {tool.name in server.tool_action_classes ? "" : " (the server's default)"}
                          {effect !== undefined && <div class="muted">{effect}</div>}
                        </td>
                      </tr>
                    )
                  })}
                </tbody>
              </table>
            </div>
          )
      )}
      {unlisted.length > 0 && (
        <p class="muted">
          Mapped but not listed by the server now:{" "}
          {unlisted.map(([tool, actionClass], i) => <span key={tool}>{i > 0 && ", "}<code>{tool}</code> → <code>{actionClass}</code></span>)}.
        </p>
      )}
      <div class="actions">
        <button
          type="button"
          disabled={loading}
          aria-describedby={problem === undefined ? undefined : errorId}
          onClick={() => refresh(testAtom)}
        >
          List tools again
        </button>
        <span role="status">
          {loading
            ? `Asking ${server.name} for its tools…`
            : tested._tag === "Success"
            ? `${tested.value.tools.length} tool${tested.value.tools.length === 1 ? "" : "s"}, listed in ${tested.value.duration_ms} ms.`
            : ""}
        </span>
      </div>
      <div role="alert">
        {problem !== undefined && !loading && (
          <p id={errorId} class="notice error">
            {problem.code === "UPSTREAM_FAILED"
              ? `${server.name} did not answer: ${String(problem.error?.error ?? problem.detail ?? problem.title)}. Its tools are left out of what agents see until it answers.`
              : `Could not list the tools of ${server.name}: ${describeProblem(problem)}`}
          </p>
        )}
      </div>
    </li>
  )
}
