/**
 * The two settings the entry points read before they load Effect
 * (`src/main.ts`, `src/cli/main.ts`), read here as the configuration
 * (`Config.ts`) reads them: `SVC_DATA_DIR`'s default, where the CLI looks
 * for a running server first, and whether the database is the embedded
 * one, for which they start its worker early.
 */
export const DEFAULT_DATA_DIR = "./.data"

/** The embedded database: `DATABASE_URL` unset or empty, as `Config.ts` takes it. */
export const embeddedDatabase = (): boolean => (process.env.DATABASE_URL ?? "") === ""
