import { configDefaults, defineConfig } from "vitest/config"
import base from "../../vitest.config.ts"

// `npm run test:runtimes`: the receiver kit and the typed client on Node,
// Deno, Bun and workerd, installed in test/runtimes, with the settings of
// `npm test`. Kept out of `npm test`: most of its time is starting those
// runtimes.
export default defineConfig({
  test: {
    ...base.test,
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/runtimes/**/*.test.ts"],
    exclude: configDefaults.exclude
  }
})
