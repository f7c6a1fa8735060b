/**
 * `npm run cli -- <command>`: issue organizations and API keys.
 *
 *   orgs create --name acme --json
 *   orgs list --json
 *   keys create --org <org id> --scopes tasks.write,tasks.read [--name ci] --json
 *   keys list --org <org id> --json
 *   keys revoke --id <key id> --json
 *   notifications reviewer-email --org <org id> (--email reviewers@example.com | --clear) --json
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Console, Effect, Layer, Logger, Option, Schema } from "effect"
import { Command, Flag } from "effect/cli"
import { CliError } from "effect/cli"
import { Scopes, type ScopeName } from "../api/Security.ts"
import { Identity } from "../identity/Identity.ts"
import { writeReviewerEmail } from "../notifications/Endpoints.ts"
import { SvcConfig } from "../platform/Config.ts"
import { CliDatabaseLive } from "./Database.ts"

const json = Flag.Boolean("json").pipe(Flag.withDescription("Print one JSON object"), Flag.withDefault(false))

const Uuid = Schema.String.check(Schema.isUUID(undefined, { message: "Expected an id (UUID)" }))

const fail = (message: string) => Effect.fail(new CliError.UserError({ cause: new Error(message), userMessage: message }))

const print = (asJson: boolean, value: unknown, text: string) => Console.log(asJson ? JSON.stringify(value) : text)

const orgsCreate = Command.make(
  "create",
  { name: Flag.String("name").pipe(Flag.withDescription("Organization name"), Flag.withSchema(Schema.NonEmptyString)), json },
  Effect.fn(function*({ name, json }) {
    const identity = yield* Identity
    const org = yield* identity.createOrg(name)
    yield* print(json, org, `created organization ${org.id} (${org.name})`)
  })
).pipe(Command.withDescription("Create an organization"))

const orgsList = Command.make(
  "list",
  { json },
  Effect.fn(function*({ json }) {
    const identity = yield* Identity
    const orgs = yield* identity.listOrgs
    yield* print(json, { orgs }, orgs.map((org) => `${org.id}  ${org.name}`).join("\n") || "no organizations")
  })
).pipe(Command.withDescription("List organizations"))

const orgs = Command.make("orgs").pipe(
  Command.withDescription("Manage organizations"),
  Command.withSubcommands([orgsCreate, orgsList])
)

const parseScopes = (raw: string) => {
  const scopes = raw.split(",").map((scope) => scope.trim()).filter((scope) => scope.length > 0)
  const unknown = scopes.filter((scope) => !(Scopes as ReadonlyArray<string>).includes(scope))
  if (scopes.length === 0) return fail("--scopes needs at least one scope")
  if (unknown.length > 0) {
    return fail(`unknown scope ${unknown.join(", ")}; known scopes: ${Scopes.join(", ")}`)
  }
  return Effect.succeed(scopes as Array<ScopeName>)
}

const keysCreate = Command.make(
  "create",
  {
    org: Flag.String("org").pipe(Flag.withDescription("Organization id"), Flag.withSchema(Uuid)),
    scopes: Flag.String("scopes").pipe(Flag.withDescription(`Comma-separated scopes: ${Scopes.join(", ")}`)),
    name: Flag.String("name").pipe(Flag.withDescription("A label for the key"), Flag.optional),
    json
  },
  Effect.fn(function*({ org, scopes, name, json }) {
    const identity = yield* Identity
    const parsed = yield* parseScopes(scopes)
    const created = yield* identity.createKey({ orgId: org, scopes: parsed, name: Option.getOrUndefined(name) }).pipe(
      Effect.catchTag("OrgNotFound", () => fail(`no organization ${org}`))
    )
    yield* print(
      json,
      { id: created.id, org_id: created.org_id, key: created.key, scopes: created.scopes },
      `created key ${created.id}\n${created.key}\n(shown only now: store it safely)`
    )
  })
).pipe(Command.withDescription("Create an API key; the key is printed only now"))

const keysList = Command.make(
  "list",
  { org: Flag.String("org").pipe(Flag.withDescription("Organization id"), Flag.withSchema(Uuid)), json },
  Effect.fn(function*({ org, json }) {
    const identity = yield* Identity
    const keys = yield* identity.listKeys(org).pipe(Effect.catchTag("OrgNotFound", () => fail(`no organization ${org}`)))
    yield* print(
      json,
      { keys },
      keys.map((key) =>
        `${key.id}  ${key.key_prefix}…  ${key.scopes.join(",")}${key.revoked_at ? `  revoked ${key.revoked_at}` : ""}`
      ).join("\n") || "no keys"
    )
  })
).pipe(Command.withDescription("List an organization's keys (never the key material)"))

const keysRevoke = Command.make(
  "revoke",
  { id: Flag.String("id").pipe(Flag.withDescription("Key id"), Flag.withSchema(Uuid)), json },
  Effect.fn(function*({ id, json }) {
    const identity = yield* Identity
    const key = yield* identity.revokeKey(id).pipe(Effect.catchTag("KeyNotFound", () => fail(`no key ${id}`)))
    yield* print(json, key, `revoked key ${key.id}`)
  })
).pipe(Command.withDescription("Revoke an API key at once"))

const keys = Command.make("keys").pipe(
  Command.withDescription("Manage API keys"),
  Command.withSubcommands([keysCreate, keysList, keysRevoke])
)

const emailPattern = /^[^\s@<>",;:()\\[\]]+@[^\s@<>",;:()\\[\]]+\.[^\s@<>",;:()\\[\]]+$/

const reviewerEmail = Command.make(
  "reviewer-email",
  {
    org: Flag.String("org").pipe(Flag.withDescription("Organization id"), Flag.withSchema(Uuid)),
    email: Flag.String("email").pipe(Flag.withDescription("Reviewer address for approval requests and deadline notices"), Flag.optional),
    clear: Flag.Boolean("clear").pipe(Flag.withDescription("Remove the reviewer address"), Flag.withDefault(false)),
    json
  },
  Effect.fn(function*({ org, email, clear, json }) {
    if (clear === Option.isSome(email)) return yield* fail("give exactly one of --email ADDRESS or --clear")
    const address = Option.getOrNull(email)
    if (address !== null && (address.length > 254 || !emailPattern.test(address))) {
      return yield* fail(`not an email address: ${address}`)
    }
    const found = yield* writeReviewerEmail(org, address)
    if (!found) return yield* fail(`no organization ${org}`)
    yield* print(
      json,
      { org_id: org, reviewer_email: address },
      address === null ? `cleared the reviewer address of ${org}` : `reviewer address of ${org}: ${address}`
    )
  })
).pipe(Command.withDescription("Set or clear the organization's reviewer email address (mailed when SVC_SMTP_URL is set)"))

const notifications = Command.make("notifications").pipe(
  Command.withDescription("Notification settings"),
  Command.withSubcommands([reviewerEmail])
)

// Commands open the database only when they run, so `--help` is instant.
const ServicesLive = Identity.layer.pipe(
  Layer.provideMerge(CliDatabaseLive),
  Layer.provide(SvcConfig.layer)
)

export const cli = Command.make("svc").pipe(
  Command.withDescription("Administer svc: organizations and API keys"),
  Command.withSubcommands([orgs, keys, notifications]),
  Command.provide(ServicesLive)
)

cli.pipe(
  Command.run({ version: "0.1.0" }),
  Effect.provide(NodeServices.layer),
  // Diagnostics go to stderr so stdout holds only the answer.
  Effect.provide(Logger.layer([Logger.withConsoleError(Logger.formatLogFmt)])),
  NodeRuntime.runMain
)
