/**
 * The links of reviewer mails (`/console/decide#<token>`): each opens one
 * approval and nothing else. Also where people reach this service
 * (`serviceBaseUrl`), for every link svc hands out: mails, and the
 * approval's console page (`approvalPageUrl`) that the MCP gateway sends
 * an agent's user to.
 *
 * - A link is made when a mail about a pending approval is sent to the
 *   organization's confirmed reviewer address, or to a group member's own
 *   (an approval assigned to the group); the token is 256 random bits and
 *   only its SHA-256 is stored, with the address the mail went to, that
 *   address setting's id and, for a member's, the member.
 * - It works only while that setting is current and confirmed (the
 *   organization's address, or that member's): checked at every use, in
 *   the database, so replacing or clearing the address ends every link
 *   mailed to it, in every process.
 * - Opening it reads the approval (a mail scanner that follows the link
 *   gets the console's page, and the page's read changes nothing); it signs
 *   nobody in: no cookie, no session, no other approval.
 * - A decision through it is the ordinary decision of `Approvals.decide`,
 *   by `email:<address>`, or by the member a member's link was mailed to
 *   (so the group check, under the approval's row lock, refuses a member
 *   removed from the group: `NOT_ASSIGNED`; under a quorum it is that
 *   member's one vote): it works while the approval is pending, after which
 *   the link shows the final state.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { HttpServer } from "effect/http"
import * as NetAddress from "effect/net/NetAddress"
import type { SqlClient } from "effect/sql"
import type { ArgumentsShapeMismatch, ArgumentsTooComplex } from "../api/ApprovalEdits.ts"
import { ApprovalLinkInvalid, type ApprovalLinkView, ReviewerAddressReplaced } from "../api/ApprovalLinks.ts"
import type { NotAssigned } from "../api/Assignment.ts"
import type { InvalidTransition, ValidationBusy } from "../api/Errors.ts"
import type { AlreadyVoted, PersonRequired } from "../api/Votes.ts"
import { SvcConfig, type SvcConfigShape } from "../platform/Config.ts"
import { randomToken } from "../platform/Crypto.ts"
import { sha256Hex } from "../platform/Digest.ts"
import { rowsOf } from "../platform/Rows.ts"
import { Approvals } from "./Approvals.ts"
import { ApprovalContexts } from "./Context.ts"
import type { DecisionEdit } from "./Edits.ts"
import { memberAddressStands } from "./MemberAddresses.ts"

/** Tokens of mail links start with this (the scrubber knows the shape). */
const MAIL_LINK_PREFIX = "sva_"

/** How records name a person who decided through a mail's link. */
const mailActor = (address: string) => `email:${address}`

/** The console page a mail links to; the token goes in the fragment, which browsers never send. */
export const mailLinkUrl = (baseUrl: string, token: string) => `${baseUrl}/console/decide#${token}`

/**
 * Where people reach this service: `SVC_PUBLIC_URL`, else the address it
 * listens on (`listening`, once bound; an unspecified host is reached on
 * the loopback address).
 */
export const publicBaseUrl = (
  config: Pick<SvcConfigShape, "publicUrl" | "host" | "port">,
  listening: Option.Option<{ readonly hostname: string; readonly port: number }>
): string =>
  Option.getOrElse(config.publicUrl, () => {
    const hostname = Option.match(listening, { onNone: () => config.host, onSome: (address) => address.hostname })
    const port = Option.match(listening, { onNone: () => config.port, onSome: (address) => address.port })
    const host = hostname === "0.0.0.0" || hostname === "::"
      ? "127.0.0.1"
      : hostname.includes(":")
      ? `[${hostname}]`
      : hostname
    return `http://${host}:${port}`
  })

/**
 * `publicBaseUrl` as this process reads it when a link is made: the
 * address the server listens on is known once it listens, before any link
 * is handed out.
 */
export const serviceBaseUrl = Effect.gen(function*() {
  const config = yield* SvcConfig
  const server = yield* Effect.serviceOption(HttpServer.HttpServer)
  return (): string =>
    publicBaseUrl(
      config,
      Option.flatMap(server, (s) => {
        try {
          const address = s.address
          return address._tag === "UnixPathAddress"
            ? Option.none()
            : Option.some({ hostname: NetAddress.formatIp(address.address), port: address.port })
        } catch {
          // Not listening (yet): the configured host and port.
          return Option.none()
        }
      })
    )
})

/**
 * The console's page of one approval (the Approvals screen showing that
 * approval alone): it opens for a person signed in to the console of the
 * approval's organization, and carries no credential.
 */
export const approvalPageUrl = (baseUrl: string, approvalId: string) =>
  `${baseUrl}/console/approvals?approval=${encodeURIComponent(approvalId)}`

/**
 * Makes the link of one mail to `address` (the address setting
 * `addressId`, of `member` when it is a group member's own) about
 * `approvalId`, if that approval exists in the organization; the token,
 * which only the mail will hold.
 */
export const issueMailLink = (
  sql: SqlClient.SqlClient,
  orgId: string,
  approvalId: string,
  address: string,
  addressId: string,
  member: string | null = null
) =>
  Effect.gen(function*() {
    const token = randomToken(MAIL_LINK_PREFIX)
    const rows = yield* sql`
      INSERT INTO approval_mail_links (token_hash, approval_id, org_id, reviewer_email, reviewer_address_id, member)
      SELECT ${
      sha256Hex(token)
    }, id, org_id, ${address}, ${addressId}, ${member} FROM approvals WHERE id = ${approvalId} AND org_id = ${orgId}
      RETURNING approval_id
    `
    return rows.length === 0 ? Option.none<string>() : Option.some(token)
  }).pipe(Effect.orDie)

const LinkRow = Schema.Struct({
  approval_id: Schema.String,
  org_id: Schema.String,
  reviewer_email: Schema.String,
  reviewer_address_id: Schema.NullOr(Schema.String),
  member: Schema.NullOr(Schema.String)
})
const LinkRows = rowsOf("approval_mail_links", LinkRow)
type Link = typeof LinkRow.Type

/**
 * SQL: whether the address setting a link was mailed under is current and
 * confirmed: the organization's, or (for a member's link) that member's
 * own. `lock` shares the row until the transaction ends.
 */
const addressHolds = (
  sql: SqlClient.SqlClient,
  link: Pick<Link, "org_id" | "reviewer_address_id" | "reviewer_email" | "member">,
  lock: boolean
) =>
  link.member === null
    ? sql`
      SELECT 1 FROM notification_settings
      WHERE org_id = ${link.org_id} AND reviewer_address_id = ${link.reviewer_address_id}
        AND reviewer_email = ${link.reviewer_email} AND reviewer_confirmed_at IS NOT NULL
      ${lock ? sql`FOR SHARE` : sql``}`
    : sql`
      SELECT 1 FROM reviewer_member_addresses
      WHERE org_id = ${link.org_id} AND member = ${link.member} AND address_id = ${link.reviewer_address_id}
        AND email = ${link.reviewer_email} AND ${sql.literal(memberAddressStands("reviewer_member_addresses"))}
      ${lock ? sql`FOR SHARE` : sql``}`

/** Who a decision through a link is recorded as: the member it was mailed to, else `email:<address>`. */
const deciderOfLink = (link: Pick<Link, "member" | "reviewer_email">) => link.member ?? mailActor(link.reviewer_email)

const INVALID = "This link opens no approval of this service. Use the whole link of the mail, or decide in the console."
const REPLACED =
  "The address this mail went to is no longer the reviewer address it was mailed as (the organization's, or the member's own): its links open nothing. Decide in the console, or through a mail to the current address."

export class ApprovalMailLinks extends Context.Service<ApprovalMailLinks, {
  readonly open: (token: string) => Effect.Effect<ApprovalLinkView, ApprovalLinkInvalid | ReviewerAddressReplaced>
  readonly decide: (
    token: string,
    decision: "approve" | "reject",
    reason: string | undefined,
    edit?: DecisionEdit
  ) => Effect.Effect<
    ApprovalLinkView,
    | ApprovalLinkInvalid
    | ReviewerAddressReplaced
    | InvalidTransition
    | AlreadyVoted
    | NotAssigned
    | PersonRequired
    | ArgumentsShapeMismatch
    | ArgumentsTooComplex
    | ValidationBusy
  >
}>()("svc/approvals/ApprovalMailLinks") {
  static readonly layer = Layer.effect(
    ApprovalMailLinks,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const approvals = yield* Approvals
      const contexts = yield* ApprovalContexts

      const find = (token: string) =>
        Effect.gen(function*() {
          if (!token.startsWith(MAIL_LINK_PREFIX) || token.length > 200) {
            return yield* new ApprovalLinkInvalid({ detail: INVALID })
          }
          // Checked at each use against the settings as they are now: the
          // link works while the address setting it was mailed under is the
          // organization's (or, for a member's link, that member's),
          // confirmed.
          const link = yield* LinkRows.one(sql`
            SELECT approval_id, org_id, reviewer_email, reviewer_address_id, member
            FROM approval_mail_links WHERE token_hash = ${sha256Hex(token)}
          `)
          if (link === undefined) return yield* new ApprovalLinkInvalid({ detail: INVALID })
          yield* Effect.annotateCurrentSpan({ "svc.org_id": link.org_id, "svc.approval_id": link.approval_id })
          const current = yield* Effect.orDie(addressHolds(sql, link, false))
          if (current.length === 0) return yield* new ReviewerAddressReplaced({ detail: REPLACED })
          return link
        })

      const view = (link: Pick<Link, "approval_id" | "org_id" | "reviewer_email" | "member">) =>
        contexts.context(link.org_id, link.approval_id).pipe(
          // The link goes with its approval: a missing one is a link that opens nothing.
          Effect.catchTag("NotFound", () => Effect.fail(new ApprovalLinkInvalid({ detail: INVALID }))),
          Effect.map((context): ApprovalLinkView => ({ ...context, decider: deciderOfLink(link) }))
        )

      const open = Effect.fn("ApprovalMailLinks.open")(function*(token: string) {
        return yield* view(yield* find(token))
      })

      const decide = Effect.fn("ApprovalMailLinks.decide")(function*(
        token: string,
        decision: "approve" | "reject",
        reason: string | undefined,
        edit?: DecisionEdit
      ) {
        const link = yield* find(token)
        // Checked again in the decision's transaction, the settings row
        // shared-locked: an address replaced meanwhile commits before the
        // decision (which is then refused) or after it, never between.
        const holds = addressHolds(sql, link, true).pipe(Effect.map((rows) => rows.length > 0), Effect.orDie)
        yield* approvals.decide(link.org_id, deciderOfLink(link), link.approval_id, {
          decision,
          reason,
          guard: { holds, refused: new ReviewerAddressReplaced({ detail: REPLACED }) },
          edit
        }).pipe(
          Effect.catchTag("NotFound", () => Effect.fail(new ApprovalLinkInvalid({ detail: INVALID }))),
          // A member key revoked meanwhile: its address went with it.
          Effect.catchTag("Unauthenticated", () => Effect.fail(new ReviewerAddressReplaced({ detail: REPLACED })))
        )
        return yield* view(link)
      })

      return ApprovalMailLinks.of({ open, decide })
    })
  )
}
