/**
 * Reviewer addresses in tests: setting one through the API sends a
 * confirmation mail, and only a confirmed address gets approval mail. These
 * read that mail from a test's SMTP server and confirm the address the way
 * a person does (the page posts the link's token).
 */
import { Effect } from "effect"
import type { TestOrg } from "../../src/testing.ts"
import { eventually, raw } from "./http.ts"

/** The link of a confirmation mail: base URL and token. */
export const CONFIRM_LINK = /(\S+)\/console\/confirm-address#(svr_[A-Za-z0-9_-]{43})/

export const decodeQuotedPrintable = (data: string) =>
  data.replace(/=\r?\n/g, "").replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)))

/** Posts a confirmation link's token as the console's page does. */
export const confirmAddress = (baseUrl: string, token: string, headers: Record<string, string> = { "x-svc-console": "1" }) =>
  raw(`${baseUrl}/v1/approval-links/address-confirmation`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ token })
  })

/**
 * Waits for a confirmation mail to `address` that `mailsTo` did not hold
 * before (`seen` of them), and answers its token.
 */
export const nextConfirmation = (mailsTo: (address: string) => ReadonlyArray<string>, address: string, seen: number) =>
  eventually(
    Effect.sync(() => {
      const found = mailsTo(address).map(decodeQuotedPrintable).filter((text) => CONFIRM_LINK.test(text))
      return found.length > seen ? CONFIRM_LINK.exec(found[found.length - 1]!)![2]! : undefined
    }),
    { what: `a confirmation mail to ${address}` }
  )

/** How many confirmation mails `address` got so far. */
export const confirmationsTo = (mailsTo: (address: string) => ReadonlyArray<string>, address: string) =>
  mailsTo(address).map(decodeQuotedPrintable).filter((text) => CONFIRM_LINK.test(text)).length

/**
 * Sets `address` as the organization's reviewer address and confirms it
 * through the link of its confirmation mail. `mailsTo` answers the raw
 * texts of the mails the test's SMTP server received for an address.
 */
export const confirmedReviewer = (
  org: TestOrg,
  baseUrl: string,
  address: string,
  mailsTo: (address: string) => ReadonlyArray<string>
) =>
  Effect.gen(function*() {
    const seen = confirmationsTo(mailsTo, address)
    const set = yield* org.client.notifications.updateSettings({ payload: { reviewer_email: address } })
    if (set.reviewer_email_status === "confirmed") return
    const token = yield* nextConfirmation(mailsTo, address, seen)
    const confirmed = yield* confirmAddress(baseUrl, token)
    if (confirmed.status !== 200) return yield* Effect.die(new Error(`confirming ${address}: ${confirmed.status} ${confirmed.text}`))
  }).pipe(Effect.orDie)
