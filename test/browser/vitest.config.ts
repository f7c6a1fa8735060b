import { configDefaults, defineConfig } from "vitest/config"
import base from "../../vitest.config.ts"

// `npm run test:browser`: the console in Chromium (test/browser/support.ts),
// with the settings of `npm test` but a longer time before a test counts as
// hung: a case drives one or two browsers through a whole screen, with
// accessibility checks and screenshots at two widths, four at a time on two
// cores. Alone the longest take 13-23 s; in CI's run the same cases took
// 10-34 s, and one (API keys and console sessions: 12.9 s alone) passed
// 60 s. A wait for something that never comes still fails after
// Playwright's 30 s.
export default defineConfig({
  test: {
    ...base.test,
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/browser/**/*.test.ts"],
    exclude: configDefaults.exclude,
    testTimeout: 180_000
  }
})
