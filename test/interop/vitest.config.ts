import { configDefaults, defineConfig } from "vitest/config"
import base from "../../vitest.config.ts"

// `npm run test:interop`: svc against the outside tools and libraries it is
// checked with (Redocly and openapi-typescript on the OpenAPI document,
// Stripe's and Svix's verifiers, the official OTLP definitions, the MCP
// conformance suite), installed in test/interop, with the settings of
// `npm test`. Kept out of `npm test`: most of its time is those tools'
// processes.
export default defineConfig({
  test: {
    ...base.test,
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/interop/**/*.test.ts"],
    exclude: configDefaults.exclude
  }
})
