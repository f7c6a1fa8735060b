/**
 * A small buffer pool, 16 MB instead of PostgreSQL's 128 MB, for a
 * database in memory and for a data folder a CLI command holds for a
 * moment. PostgreSQL fills its whole pool's memory at start, page by page;
 * in memory the pages already live in PGlite's in-memory file system, so a
 * bigger pool would only hold a second copy, and a command reads too
 * little to fill one. A server on a data folder keeps the default.
 *
 * Speeds up: opening such a database. The migrated test snapshot through
 * `Database.memoryFrom`, one process, the mean of six opens after four,
 * two runs (two cores): 0.95-1.10 s, 1.12-1.25 CPU-s and 47 000-56 000
 * page faults with 128 MB; 0.52-0.57 s, 0.68-0.76 CPU-s and 19 000-20 000
 * with 16 MB. A CLI command on a data folder (`orgs list`, three runs
 * each): 1.73-1.87 s and 2.4-2.5 CPU-s before, 1.41-1.55 s and 2.0-2.15
 * after.
 */
import { PGlite } from "@electric-sql/pglite"

/** PostgreSQL's start parameters with the small pool. */
export const smallPoolStartParams: ReadonlyArray<string> = [...PGlite.defaultStartParams, "-c", "shared_buffers=16MB"]
