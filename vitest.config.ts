import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration files each start a service and a database; two cores.
    maxWorkers: 2,
    sequence: { concurrent: false }
  }
})
