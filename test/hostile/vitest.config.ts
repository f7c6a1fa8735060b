import { defineConfig } from "vitest/config"

// `npm run test:hostile`: each tenant input at the largest and most expensive
// size the limits allow, against a server of its own, while another
// organization's requests are timed (test/support/hostile.ts). One file at a
// time, so that no other test's load is counted against the case measured.
export default defineConfig({
  test: {
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/hostile/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 180_000,
    hookTimeout: 180_000,
    fileParallelism: false,
    maxWorkers: 1,
    execArgv: ["--wasm-wrapper-tiering-budget=1000000000"],
    sequence: { concurrent: false }
  }
})
