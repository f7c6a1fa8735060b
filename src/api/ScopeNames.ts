/**
 * The names of the scopes and of the console's presets, as plain lists
 * (`Security.ts` builds the schemas on them): the CLI's help lists them
 * without loading the HttpApi modules.
 */

/** Every scope a key can hold (docs/api.md, "Scopes"). */
export const Scopes = [
  "feedback.write",
  "feedback.review",
  "feedback.read",
  "datasets.write",
  "datasets.read",
  "org_config.read",
  "org_config.write",
  "tasks.read",
  "tasks.write",
  "agents.read",
  "agents.write",
  "approvals.decide",
  "keys.manage",
  "mcp.use"
] as const

/** The console's presets (`ConsolePresets` in `Security.ts` says what each holds). */
export const ConsolePresetNames = ["reviewer", "approver", "admin"] as const
