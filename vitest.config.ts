import { configDefaults, defineConfig } from "vitest/config"
import { SlowFirst } from "./test/support/sequencer.ts"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Suites of their own, each a step of CI: the packaging test (npm run
    // test:packages) packs and installs everything; the hostile-tenant suite
    // (npm run test:hostile) times one server alone; svc as processes (npm
    // run test:processes) and the console in Chromium (npm run test:browser)
    // each take about a third of the CPU the rest takes; the outside tools
    // (npm run test:interop) and runtimes (npm run test:runtimes) start
    // processes of their own, 54 s of a run's file time in CI.
    exclude: [
      ...configDefaults.exclude,
      "test/packaging/**",
      "test/hostile/**",
      "test/processes/**",
      "test/browser/**",
      "test/interop/**",
      "test/runtimes/**"
    ],
    // A migrated database written once, that every in-process service on
    // PGlite starts as a copy of (test/support/global-setup.ts).
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Four workers on two cores: an integration file keeps a core about
    // a third busy on its own (it waits on its receivers, retries and flush
    // periods: telemetry/export 25 CPU-s in 87 s, webhooks/delivery 7 in
    // 42), so with fewer workers a core often idles. Measured on two cores,
    // the whole suite: three workers 454 s (1.5 cores busy); four against
    // six back to back, 430 s and 687 CPU-s against 438 s and 726 (1.59
    // and 1.65 busy: the files slow each other); eight 470 s and 790. On a
    // faster two-core machine six passed once in 309 s against four's 338,
    // and in another run two SvcTest.layer builds of one file waited 120 s
    // each with their process idle (cause not found): four until that is.
    // Later, with less CPU a file: four and six alike (299.9 and 299.8 s),
    // the machine's two cores busy 95 % of the run either way.
    maxWorkers: 4,
    // Each worker runs file after file in one process: the modules every
    // file imports (Effect, the service) load once per worker, not once per
    // file in a process of its own. Each file still builds its own service
    // and database; nothing in src/ keeps state between them but caches.
    isolate: false,
    // V8 in Node 24 can abort the process (SIGTRAP, "Check failed:
    // jit_page.has_value()") when it tiers up a wasm-to-JS wrapper and, in the
    // same step, frees the wrappers of a wasm instance that is gone: seen in
    // test files that open and close several embedded databases (PGlite is
    // WebAssembly) in one process. A budget no test reaches keeps PGlite's
    // imports on V8's generic wrapper, so that path never runs. svc itself
    // opens one embedded database per process and is not affected.
    execArgv: ["--wasm-wrapper-tiering-budget=1000000000"],
    // Files that start processes or a browser first, on a new checkout too
    // (test/support/sequencer.ts): no long file left to run alone at the end.
    sequence: { concurrent: false, sequencer: SlowFirst }
  }
})
