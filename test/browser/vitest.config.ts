import { configDefaults, defineConfig } from "vitest/config"
import base from "../../vitest.config.ts"

// `npm run test:browser`: the console in Chromium (test/browser/support.ts),
// with the settings of `npm test`.
export default defineConfig({
  test: {
    ...base.test,
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/browser/**/*.test.ts"],
    exclude: configDefaults.exclude
  }
})
