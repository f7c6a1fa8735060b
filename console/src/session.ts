/** Who is signed in, and the screens their preset offers. */
import type { ScopeName } from "../../src/api/Security.ts"
import { SvcApi } from "./api.ts"

export const sessionAtom = SvcApi.query("consoleSignIn", "session", { reactivityKeys: ["session"] })

export interface Screen {
  readonly path: string
  readonly label: string
  /** The scope without which the screen is not offered. */
  readonly scope: ScopeName
}

/** The console's screens, in menu order; link names are contract. */
export const screens: ReadonlyArray<Screen> = [
  { path: "/review", label: "Review", scope: "feedback.read" },
  { path: "/promote", label: "Promote", scope: "datasets.write" },
  { path: "/approvals", label: "Approvals", scope: "approvals.decide" },
  { path: "/policies", label: "Policies", scope: "org_config.write" },
  { path: "/reviewers", label: "Reviewers", scope: "org_config.write" },
  { path: "/webhooks", label: "Webhooks", scope: "org_config.write" },
  { path: "/telemetry", label: "Telemetry", scope: "org_config.write" },
  { path: "/mcp-servers", label: "MCP servers", scope: "org_config.write" },
  { path: "/keys", label: "API keys", scope: "keys.manage" }
]

export const has = (scopes: ReadonlyArray<string>, scope: ScopeName) => scopes.includes(scope)
