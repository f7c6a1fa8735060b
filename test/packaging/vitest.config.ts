import { defineConfig } from "vitest/config"

// `npm run test:packages`: the packaging test alone (two to three minutes, so not in `npm test`).
export default defineConfig({
  test: {
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/packaging/**/*.test.ts"],
    testTimeout: 180_000,
    hookTimeout: 300_000,
    sequence: { concurrent: false }
  }
})
