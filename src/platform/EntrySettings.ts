/**
 * The two settings the entry points read before they load Effect
 * (`src/main.ts`, `src/cli/main.ts`), read here as the configuration
 * (`Config.ts`) reads them: `SVC_DATA_DIR`'s default, where the CLI looks
 * for a running server first, and whether the database is the embedded
 * one, for which they start its worker early.
 */
export const DEFAULT_DATA_DIR = "./.data"

/** Whether a `DATABASE_URL` of this value means the embedded database: unset or empty (`Config.ts` reads it so too). */
export const namesEmbedded = (databaseUrl: string | undefined): boolean => (databaseUrl ?? "") === ""

/** The embedded database, by the environment's `DATABASE_URL`. */
export const embeddedDatabase = (): boolean => namesEmbedded(process.env.DATABASE_URL)
