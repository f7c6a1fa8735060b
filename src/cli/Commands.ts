/**
 * The CLI's command tree, run by `npm run cli` in its own process or, while
 * a server holds the embedded data directory, by that server on its admin
 * channel (`src/cli/AdminChannel.ts`): the same handlers either way. The
 * handlers live by what they act on: `OrgCommands.ts` (orgs, keys,
 * notifications), `ConsoleCommands.ts` and `DbCommands.ts`.
 *
 *   start   (the server: `main.ts` runs it; listed for --help)
 *   db query "SELECT ..." --json
 *   db dump > svc.sql
 *
 *   orgs create --name acme --json
 *   orgs list --json
 *   orgs delete --id <org id> --json
 *   keys create --org <org id> --scopes tasks.write,tasks.read [--name ci] --json
 *   keys list --org <org id> --json
 *   keys revoke --id <key id> --json
 *   notifications reviewer-email --org <org id> (--email reviewers@example.com | --clear) --json
 *   console login --org <org id> --preset reviewer|approver|admin --name "Ada" [--ttl 15m] --json
 *   console sessions --org <org id> --json
 *   console revoke (--session <session id> | --all --org <org id> | --person <name> --org <org id>) --json
 */
import * as Command from "effect/cli/Command"
import { fail } from "./Common.ts"
import { consoleCommand } from "./ConsoleCommands.ts"
import { db } from "./DbCommands.ts"
import { keys, notifications, orgs } from "./OrgCommands.ts"

/**
 * `svc start` serves the HTTP API: `main.ts` runs the server for it before
 * any of this loads. It is listed here so `svc --help` shows it; reached
 * only with arguments it does not take.
 */
const start = Command.make(
  "start",
  {},
  () =>
    fail(
      "start takes no arguments: its settings come from the environment (PORT, HOST, DATABASE_URL, SVC_*; see the README)"
    )
).pipe(Command.withDescription("Serve the HTTP API on HOST:PORT, as `npm start` does (settings from the environment)"))

/** The root command, without its services: the caller provides them. */
export const commands = Command.make("svc").pipe(
  Command.withDescription(
    "Administer svc: organizations, API keys, console sign-in and the database (`svc start` serves the HTTP API)"
  ),
  Command.withSubcommands([start, orgs, keys, notifications, consoleCommand, db])
)
