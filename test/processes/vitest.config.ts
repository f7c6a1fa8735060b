import { configDefaults, defineConfig } from "vitest/config"
import base from "../../vitest.config.ts"

// `npm run test:processes`: svc as a user runs it, as processes of its own:
// start-up and its refusals, shutdown, kill -9 and restart, the CLI beside
// a running server, several processes on one database, and the example
// agents and receiver run as written. The settings of `npm test`.
//
// On a PostgreSQL server (`TEST_DATABASE_URL`) the example agents and the
// example receiver are left out: their processes reach svc only over HTTP,
// so on the server they would only test svc's API once more, which the
// integration suite does there.
const onServer = (process.env.TEST_DATABASE_URL ?? "") !== ""
const examples = [
  "test/processes/agents/agent-examples.test.ts",
  "test/processes/agents/mcp-agent.test.ts",
  "test/processes/webhooks/example-receiver.test.ts"
]

export default defineConfig({
  test: {
    ...base.test,
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/processes/**/*.test.ts"],
    exclude: [...configDefaults.exclude, ...(onServer ? examples : [])]
  }
})
