/**
 * `SVC_DATA_DIR`'s default, apart from `Config.ts` (which loads Effect):
 * the CLI's entry point looks for a running server in it before it loads
 * anything else (`src/cli/main.ts`).
 */
export const DEFAULT_DATA_DIR = "./.data"
