/**
 * The browser tests' world: a real `svc` server started as `svc start`
 * starts it (`startServer`: its own data directory and port, the console built
 * by the build script `npm install` runs), Debian's chromium driven by
 * playwright-core, and guards that fail a test on any page error, console
 * error or request to another origin.
 *
 * Without a browser the tests fail in CI (`CI` set) and are skipped with a
 * loud message elsewhere: `.ci/run` installs chromium when it is missing.
 */
import axe from "axe-core"
import { Effect, Exit, Scope } from "effect"
import { SqlClient } from "effect/sql"
import * as fs from "node:fs"
import * as path from "node:path"
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core"
import { assert, describe } from "vitest"
import { Scopes } from "../../src/api/Security.ts"
import { adminSocketPath, sendCommand } from "../../src/cli/Admin.ts"
import { Database } from "../../src/database/Database.ts"
import { HttpsReceiver, type HttpsReceiverOptions } from "../support/HttpsReceiver.ts"
import { cli, root, type RunningServer, seededDataDir, startServer } from "../support/process.ts"
import { TestTls } from "../support/tls.ts"

export const chromiumPath = process.env.SVC_CHROMIUM ?? "/usr/bin/chromium"
export const browserAvailable = fs.existsSync(chromiumPath)
const inCi = process.env.CI !== undefined && process.env.CI !== "" && process.env.CI !== "false"

/**
 * `describe` for browser flows: runs them when chromium is there; in CI a
 * missing browser is a failure, elsewhere a loud skip.
 */
export const describeBrowser = (name: string, body: () => void) => {
  // In CI a missing browser fails: `startWorld` throws in each file's beforeAll.
  if (browserAvailable || inCi) return describe(name, body)
  console.warn(
    `\n*** SKIPPED browser tests "${name}": no chromium at ${chromiumPath} (apt-get install -y chromium, or set SVC_CHROMIUM) ***\n`
  )
  return describe.skip(name, body)
}

export const screenshotDir = path.join(root, "browser-screenshots")

/**
 * Whether screenshots are written: they are for a person looking at the
 * screens, and `SVC_BROWSER_SHOTS=0` leaves them out (CI, where nobody
 * does: a fifth of a screen test's CPU). Every check runs either way.
 */
export const takingShots = process.env.SVC_BROWSER_SHOTS !== "0"

const json = (text: string) => JSON.parse(text.trim().split("\n").at(-1)!)

export interface World {
  readonly server: RunningServer
  readonly baseUrl: string
  readonly env: Record<string, string>
  readonly orgId: string
  /** A bearer key holding every scope, for arranging state through the API. */
  readonly adminKey: string
  readonly browser: Browser
  /** Calls the API with the admin key; answers status and parsed body. */
  readonly api: (
    method: string,
    path: string,
    body?: unknown,
    key?: string
  ) => Promise<{ status: number; body: any; headers: Headers }>
  /** A one-time sign-in link from `npm run cli -- console login`, pointed at this server. */
  readonly signInLink: (
    preset: "reviewer" | "approver" | "admin",
    name: string,
    extra?: ReadonlyArray<string>
  ) => Promise<string>
  /**
   * The same link, asked of the server's admin channel from this process
   * as the CLI asks it (a CLI run costs a Node start): for flows about what
   * a session does, not how the link is made.
   */
  readonly link: (preset: "reviewer" | "approver" | "admin", name: string) => Promise<string>
  /** A fresh browser context with the guards on (see `Guarded`). */
  readonly open: (options?: { colorScheme?: "light" | "dark"; width?: number }) => Promise<Guarded>
  readonly receiver: (options?: HttpsReceiverOptions) => Promise<HttpsReceiver["Service"]>
  /** Runs SQL on the server's database (through its socket, as the CLI does): for moving time past a deadline. */
  readonly sql: (statement: string) => Promise<ReadonlyArray<Record<string, unknown>>>
  readonly close: () => Promise<void>
}

export interface Guarded {
  readonly context: BrowserContext
  readonly page: Page
  /** Page errors, console errors and requests to other origins seen so far. */
  readonly problems: Array<string>
  /** Fails the test if any guard tripped; closes the context. */
  readonly done: () => Promise<void>
}

export const ALL_SCOPES = Scopes

/**
 * One chromium per test worker: Vitest runs a worker's files one after
 * another in one process (`isolate: false`), so the browser launched for
 * the first browser file serves the worker's later ones, each in contexts
 * of its own (`open`). The fourteen browser files, four workers: four
 * launches instead of fourteen, 173 and 154 CPU-s against 180 and 163 with
 * a browser per file (two runs each, alternated). Playwright ends the
 * browser when the worker exits.
 */
let sharedBrowser: Promise<Browser> | undefined
const launchedBrowser = (): Promise<Browser> => {
  sharedBrowser ??= chromium.launch({
    // chromium.sh runs chromiumPath without the address bar's popups (see there).
    executablePath: path.join(import.meta.dirname, "chromium.sh"),
    env: { ...process.env, SVC_CHROMIUM: chromiumPath },
    headless: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage"]
  }).then(
    (browser) => {
      browser.on("disconnected", () => (sharedBrowser = undefined))
      return browser
    },
    (error) => {
      sharedBrowser = undefined
      throw error
    }
  )
  return sharedBrowser
}

/** Starts svc, provisions an organization and an admin key; chromium is the worker's (`launchedBrowser`). */
export const startWorld = async (
  name: string,
  options: { readonly env?: Record<string, string> } = {}
): Promise<World> => {
  if (!browserAvailable) {
    throw new Error(`no chromium at ${chromiumPath}: the browser tests need it (apt-get install -y chromium)`)
  }
  const scope = Effect.runSync(Scope.make())
  const tls = await Effect.runPromise(TestTls.shared)
  const dataDir = seededDataDir(`svc-browser-${name}-`)
  const env: Record<string, string> = {
    SVC_DATA_DIR: dataDir,
    DATABASE_URL: "",
    SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8",
    SVC_EXTRA_CA_FILE: tls.caFile,
    // Failed webhook attempts retry quickly, so a test sees a delivery fail for good.
    SVC_WEBHOOK_RETRY_SCHEDULE: "1s",
    ...options.env
  }
  // The server opens the migrated database; commands then go through its
  // admin channel, sent from this process as the CLI sends them (a CLI run
  // costs a Node start; the flows about the CLI itself run it).
  const admin = (args: ReadonlyArray<string>) => sendCommand(adminSocketPath(dataDir), args)
  let [server, browser] = await Promise.all([startServer(env), launchedBrowser()])
  const org = await admin(["orgs", "create", "--name", name, "--json"])
  assert.strictEqual(org.code, 0, org.stderr)
  const orgId = json(org.stdout).id as string
  const key = await admin(["keys", "create", "--org", orgId, "--scopes", ALL_SCOPES.join(","), "--json"])
  assert.strictEqual(key.code, 0, key.stderr)
  const adminKey = json(key.stdout).key as string
  const baseUrl = server.baseUrl
  fs.mkdirSync(screenshotDir, { recursive: true })

  const api: World["api"] = async (method, route, body, bearer = adminKey) => {
    const response = await fetch(`${baseUrl}${route}`, {
      method,
      headers: {
        authorization: `Bearer ${bearer}`,
        ...(body === undefined ? {} : { "content-type": "application/json" })
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const text = await response.text()
    return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers }
  }

  const signInLink: World["signInLink"] = async (preset, person, extra = []) => {
    const made = await cli([
      "console",
      "login",
      "--org",
      orgId,
      "--preset",
      preset,
      "--name",
      person,
      "--json",
      ...extra
    ], {
      ...env,
      SVC_PUBLIC_URL: baseUrl
    })
    assert.strictEqual(made.code, 0, made.stderr)
    const link = new URL(json(made.stdout).url as string)
    // The link names the server's public address; ours listens on an ephemeral port.
    return `${baseUrl}${link.pathname}${link.hash}`
  }

  const origin = new URL(baseUrl).origin
  const open: World["open"] = async (options = {}) => {
    const context = await browser.newContext({
      colorScheme: options.colorScheme ?? "light",
      viewport: { width: options.width ?? 1280, height: 900 },
      reducedMotion: "reduce"
    })
    const page = await context.newPage()
    const problems: Array<string> = []
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`))
    page.on("console", (message) => {
      if (message.type() !== "error") return
      // Chromium reports every error answer of `fetch` on the console. The
      // API's documented problems (a 409 after a decision elsewhere, a used
      // link's 410, a collector's refusal as 502 EXPORT_FAILED) are answers
      // the console handles and each flow checks on screen; anything else
      // (a 500, a script error, a CSP violation, a failed load) counts.
      const location = message.location().url
      if (
        /^Failed to load resource: the server responded with a status of (4\d\d|502)\b/.test(message.text()) &&
        location.startsWith(`${origin}/v1/`)
      ) return
      problems.push(`console error: ${message.text()} (${location})`)
    })
    page.on("request", (request) => {
      const url = request.url()
      if (!url.startsWith(origin)) problems.push(`request to another origin: ${url}`)
    })
    return {
      context,
      page,
      problems,
      done: async () => {
        await context.close()
        // The server's own account of a failed answer, beside the page's.
        const logged = problems.length === 0
          ? []
          : server.output().split("\n").filter((line) => /"level":"(ERROR|FATAL)"/.test(line)).slice(-5)
        assert.deepStrictEqual(
          problems,
          [],
          `the page had errors or reached another origin${
            logged.length === 0 ? "" : `; the server logged:\n${logged.join("\n")}`
          }`
        )
      }
    }
  }

  const receiver: World["receiver"] = (options) =>
    Effect.runPromise(HttpsReceiver.make(options).pipe(Scope.provide(scope)))

  /**
   * Nothing outside the server reaches its database: the statement runs
   * while the server is stopped, and the server starts again on its port
   * (open pages keep their origin).
   */
  const sql: World["sql"] = async (statement) => {
    server.child.kill("SIGTERM")
    await server.exited.catch(() => undefined)
    const rows = await Effect.runPromise(
      SqlClient.SqlClient.use((client) => client.unsafe<Record<string, unknown>>(statement)).pipe(
        Effect.provide(Database.embedded(dataDir)),
        Effect.scoped,
        Effect.orDie
      )
    )
    server = await startServer({ ...env, PORT: new URL(baseUrl).port })
    return rows
  }

  const link: World["link"] = async (preset, person) => {
    const made = await admin(["console", "login", "--org", orgId, "--preset", preset, "--name", person, "--json"])
    assert.strictEqual(made.code, 0, made.stderr)
    return `${baseUrl}/console/sign-in#${new URL(json(made.stdout).url as string).hash.slice(1)}`
  }

  return {
    get server() {
      return server
    },
    link,
    sql,
    baseUrl,
    env,
    orgId,
    adminKey,
    browser,
    api,
    signInLink,
    open,
    receiver,
    close: async () => {
      // The browser stays for the worker's next file: only this file's contexts close.
      await Promise.all(browser.contexts().map((context) => context.close().catch(() => undefined)))
      server.child.kill("SIGTERM")
      await server.exited.catch(() => undefined)
      await Effect.runPromise(Scope.close(scope, Exit.void))
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  }
}

/** Signs in through the link page, as a person would: open the link, press "Sign in". */
/** A `bank.payout` step of `amount` (class `payments.payout`) in `sessionId`, which the world's policy leaves pending: its approval's id. */
export const pendingPayout = async (world: World, sessionId: string, stepId: string, amount: number) => {
  const step = await world.api("POST", `/v1/agent-sessions/${sessionId}/steps`, {
    step_id: stepId,
    tool: "bank.payout",
    action_class: "payments.payout",
    arguments: { amount, to: "DE89370400440532013000" }
  })
  assert.strictEqual(step.body.decision, "pending", JSON.stringify(step.body))
  return step.body.approval_id as string
}

export const signIn = async (page: Page, link: string) => {
  await page.goto(link)
  await page.getByRole("button", { name: "Sign in" }).click()
  await page.getByRole("navigation", { name: "Screens" }).waitFor()
}

/** axe-core on the current page: fails on serious or critical violations. */
export const checkAccessibility = async (page: Page, what: string) => {
  // Evaluated through the DevTools protocol, which the page's CSP does not govern.
  await page.evaluate(axe.source)
  const result = await page.evaluate(() =>
    (globalThis as any).axe.run(document, { resultTypes: ["violations"] }) as Promise<{ violations: Array<any> }>
  )
  const serious = result.violations.filter((violation) =>
    violation.impact === "serious" || violation.impact === "critical"
  )
  assert.deepStrictEqual(
    serious.map((violation) =>
      `${violation.id}: ${violation.help} (${violation.nodes.map((node: any) => node.target.join(" ")).join(", ")})`
    ),
    [],
    `accessibility violations on ${what}`
  )
}

export const screenshot = async (page: Page, name: string) => {
  if (takingShots) await page.screenshot({ path: path.join(screenshotDir, `${name}.png`), fullPage: true })
}

/** Polls `check` until it is truthy (real clock, generous deadline). */
export const until = async <A>(
  check: () => Promise<A | undefined | false>,
  what: string,
  timeoutMs = 15_000
): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

/** A node's text with its runs of white space made one space. */
export const flat = (text: string | null) => (text ?? "").replace(/\s+/g, " ").trim()

/**
 * The screen stops polling, as it does while the page is out of sight
 * (`useInterval` polls only while `document.visibilityState` is "visible"):
 * a row then stays as the console last showed it while a test changes it
 * through the API, as it would for a person between two polls.
 */
export const stopPolling = (page: Page) =>
  page.evaluate(() => Object.defineProperty(document, "visibilityState", { value: "hidden", configurable: true }))

/** Polling again (`stopPolling` undone). */
export const resumePolling = (page: Page) =>
  page.evaluate(() => delete (document as { visibilityState?: unknown }).visibilityState)
