/**
 * The commands on organizations and what belongs to them: `orgs`, `keys`
 * (API keys) and `notifications reviewer-email`.
 */
import * as Command from "effect/cli/Command"
import * as Flag from "effect/cli/Flag"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Scopes } from "../api/ScopeNames.ts"
import type { ScopeName } from "../api/Security.ts"
import { fail, json, loadIdentity, print, Uuid } from "./Common.ts"

const orgsCreate = Command.make(
  "create",
  {
    name: Flag.String("name").pipe(Flag.withDescription("Organization name"), Flag.withSchema(Schema.NonEmptyString)),
    json
  },
  Effect.fn(function*({ name, json }) {
    const identity = yield* loadIdentity
    const namesakes = yield* identity.namesakes(name)
    const org = yield* identity.createOrg(name)
    // Names need not be unique; a second one of a name is told on stderr, so --json's output stays one object.
    if (namesakes.length > 0) {
      const ids = namesakes.map((other) => other.id).join(", ")
      yield* Console.error(
        `svc: note: ${JSON.stringify(name)} is also the name of ${ids}; this organization is ${org.id}`
      )
    }
    yield* print(json, org, `created organization ${org.id} (${org.name})`)
  })
).pipe(Command.withDescription("Create an organization (a name another has is allowed, and noted on stderr)"))

const orgsList = Command.make(
  "list",
  { json },
  Effect.fn(function*({ json }) {
    const identity = yield* loadIdentity
    const orgs = yield* identity.listOrgs
    yield* print(json, { orgs }, orgs.map((org) => `${org.id}  ${org.name}`).join("\n") || "no organizations")
  })
).pipe(Command.withDescription("List organizations"))

const orgsDelete = Command.make(
  "delete",
  { id: Flag.String("id").pipe(Flag.withDescription("Organization id"), Flag.withSchema(Uuid)), json },
  Effect.fn(function*({ id, json }) {
    const identity = yield* loadIdentity
    const { keys } = yield* identity.deleteOrg(id).pipe(
      Effect.catchTag("OrgNotFound", () => fail(`no organization ${id}`))
    )
    yield* print(
      json,
      { id, deleted: true, keys },
      `deleted organization ${id} and all its data (${keys} API key(s) refused from now on)`
    )
  })
).pipe(
  Command.withDescription(
    "Delete an organization and every row of its data, in one transaction; its keys are refused at once"
  )
)

export const orgs = Command.make("orgs").pipe(
  Command.withDescription("Manage organizations"),
  Command.withSubcommands([orgsCreate, orgsList, orgsDelete])
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
    const identity = yield* loadIdentity
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
    const identity = yield* loadIdentity
    const keys = yield* identity.listKeys(org).pipe(
      Effect.catchTag("OrgNotFound", () => fail(`no organization ${org}`))
    )
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
    const identity = yield* loadIdentity
    const key = yield* identity.revokeKey(id).pipe(Effect.catchTag("KeyNotFound", () => fail(`no key ${id}`)))
    yield* print(json, key, `revoked key ${key.id}`)
  })
).pipe(Command.withDescription("Revoke an API key at once"))

export const keys = Command.make("keys").pipe(
  Command.withDescription("Manage API keys"),
  Command.withSubcommands([keysCreate, keysList, keysRevoke])
)

const emailPattern = /^[^\s@<>",;:()\\[\]]+@[^\s@<>",;:()\\[\]]+\.[^\s@<>",;:()\\[\]]+$/

const reviewerEmail = Command.make(
  "reviewer-email",
  {
    org: Flag.String("org").pipe(Flag.withDescription("Organization id"), Flag.withSchema(Uuid)),
    email: Flag.String("email").pipe(
      Flag.withDescription("Reviewer address for approval requests and deadline notices"),
      Flag.optional
    ),
    clear: Flag.Boolean("clear").pipe(Flag.withDescription("Remove the reviewer address"), Flag.withDefault(false)),
    json
  },
  Effect.fn(function*({ org, email, clear, json }) {
    if (clear === Option.isSome(email)) return yield* fail("give exactly one of --email ADDRESS or --clear")
    const address = Option.getOrNull(email)
    if (address !== null && (address.length > 254 || !emailPattern.test(address))) {
      return yield* fail(`not an email address: ${address}`)
    }
    // Loaded here: the endpoints module brings the delivery queue and the
    // outbound HTTP client, which no other command needs.
    const { writeReviewerEmail } = yield* Effect.promise(() => import("../notifications/ReviewerAddress.ts"))
    const found = yield* writeReviewerEmail(org, address)
    if (!found) return yield* fail(`no organization ${org}`)
    yield* print(
      json,
      { org_id: org, reviewer_email: address },
      address === null ? `cleared the reviewer address of ${org}` : `reviewer address of ${org}: ${address}`
    )
  })
).pipe(
  Command.withDescription(
    "Set or clear the organization's reviewer email address (mailed when SVC_SMTP_URL is set); an address the operator sets needs no confirmation"
  )
)

export const notifications = Command.make("notifications").pipe(
  Command.withDescription("Notification settings"),
  Command.withSubcommands([reviewerEmail])
)
