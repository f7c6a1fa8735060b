/**
 * An agent that reaches its tools through svc's MCP gateway (docs/mcp.md),
 * with the official MCP SDK's client and nothing of svc's:
 *
 *   1. connect to svc's `/mcp` with an API key (scope `mcp.use`);
 *   2. list the tools, each with the action class svc governs it as;
 *   3. call one as a task (`task: {}`): svc answers with the task at once,
 *      already `completed` when the call was allowed (the tool ran) or
 *      `failed` when it was refused, else `working` while a person decides;
 *   4. poll the task (`tasks/get`, at the interval svc asks for) until it is
 *      over, printing each change of its status, then read its result
 *      (`tasks/result`): the tool's result, or a tool error saying why the
 *      tool did not run (refused, rejected by a person, nobody decided in
 *      time) or how it failed.
 *
 *   SVC_URL=http://127.0.0.1:8080 SVC_API_KEY=$KEY npm run -s example:mcp-agent -- ops__deploy '{"text":"v9"}'
 *
 * It prints one line per thing that happens. The exit code is 0 when the
 * call came to an end (whatever its outcome: a refusal is an answer), 1 when
 * svc could not be reached or answered with a protocol error.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import {
  type CallToolResult,
  CallToolResultSchema,
  CreateTaskResultSchema,
  type Task
} from "@modelcontextprotocol/sdk/types.js"

const [tool, argumentsJson = "{}"] = process.argv.slice(2)
if (tool === undefined) {
  console.error("usage: npm run -s example:mcp-agent -- TOOL [ARGUMENTS_JSON]")
  process.exit(2)
}
const toolArguments = JSON.parse(argumentsJson) as Record<string, unknown>
const baseUrl = process.env.SVC_URL ?? "http://127.0.0.1:8080"

/** What a tool answered, as a person reads it: its text, or an error with its text. */
const show = (result: CallToolResult) => {
  const text = result.content.map((item) => (item.type === "text" ? item.text : `[${item.type}]`)).join("\n")
  console.log(result.isError === true ? `tool error: ${text}` : `result: ${text}`)
}

/** A task's status; while it waits, with svc's message (which approval, and its deadlines). */
const showTask = (task: Task) =>
  console.log(
    `task ${task.taskId}: ${task.status}${
      task.status === "working" && task.statusMessage !== undefined ? `: ${task.statusMessage}` : ""
    }`
  )

const isOver = (task: Task) => task.status === "completed" || task.status === "failed" || task.status === "cancelled"

const main = async () => {
  // 1. Connect: `initialize` opens an MCP session (an agent session of svc), named in Mcp-Session-Id.
  const client = new Client({ name: "svc-example-mcp-agent", version: "1.0.0" })
  const transport = new StreamableHTTPClientTransport(new URL("/mcp", baseUrl), {
    requestInit: { headers: { authorization: `Bearer ${process.env.SVC_API_KEY ?? ""}` } }
  })
  await client.connect(transport)
  console.log(`session ${transport.sessionId}`)
  try {
    // 2. The tools of every upstream server of the organization, as `<server>__<tool>`.
    const { tools } = await client.listTools()
    for (const listed of tools) console.log(`tool ${listed.name}: ${String(listed._meta?.["svc/action_class"])}`)

    // 3. The call, as a task: a call that waits for a person does not hold the connection.
    console.log(`call ${tool} ${JSON.stringify(toolArguments)}`)
    const created = await client.request(
      { method: "tools/call", params: { name: tool, arguments: toolArguments, task: {} } },
      CreateTaskResultSchema
    )

    // 4. A call decided at once comes as a task already over. One waiting for a person: poll it until it
    // is over. It lives in svc's database, so an agent that restarts (or another one, with a key of the
    // organization) reads it on by its id.
    let task: Task = created.task
    showTask(task)
    while (!isOver(task)) {
      await new Promise((resolve) => setTimeout(resolve, task.pollInterval ?? 1000))
      const now = await client.experimental.tasks.getTask(task.taskId)
      if (now.status !== task.status) showTask(now)
      task = now
    }
    show(await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema))
  } finally {
    await transport.terminateSession().catch(() => undefined)
    await client.close()
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : String(error))
  process.exitCode = 1
})
