import { configDefaults, defineConfig } from "vitest/config"
import base from "../../vitest.config.ts"

// `npm run test:processes`: svc as a user runs it, as processes of its own:
// start-up and its refusals, shutdown, kill -9 and restart, the CLI beside
// a running server, several processes on one database, and the example
// agents and receiver run as written. The settings of `npm test`.
export default defineConfig({
  test: {
    ...base.test,
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/processes/**/*.test.ts"],
    exclude: configDefaults.exclude
  }
})
