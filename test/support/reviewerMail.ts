/**
 * Reviewer addresses in tests: setting one through the API sends a
 * confirmation mail, and only a confirmed address gets approval mail. These
 * read that mail from a test's SMTP server and confirm the address the way
 * a person does (the page posts the link's token).
 */
import { Effect, type Scope } from "effect"
import type { AddressInfo } from "node:net"
import { SMTPServer } from "smtp-server"
import type { TestOrg } from "../../src/testing.ts"
import { eventually, raw } from "./http.ts"

/** A message the test's SMTP server accepted: the envelope's recipients and sender, and the raw message. */
export interface SinkMail {
  readonly to: ReadonlyArray<string>
  readonly from: string
  readonly data: string
}

/**
 * An SMTP server on loopback (no TLS, no authentication) until the scope
 * closes: each message it accepts goes to `onMail`; a recipient `refuse`
 * names is refused for now (a temporary 451), so its mail waits to be
 * retried. Answers the port.
 */
export const smtpSink = (
  onMail: (mail: SinkMail) => void,
  refuse: (address: string) => boolean = () => false
): Effect.Effect<number, never, Scope.Scope> => {
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onRcptTo(address, _session, callback) {
      if (!refuse(address.address)) return callback()
      callback(Object.assign(new Error("try again later"), { responseCode: 451 }))
    },
    onData(stream, session, callback) {
      const chunks: Array<Buffer> = []
      stream.on("data", (chunk: Buffer) => chunks.push(chunk))
      stream.on("end", () => {
        onMail({
          to: session.envelope.rcptTo.map((r) => r.address),
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          data: Buffer.concat(chunks).toString("utf8")
        })
        callback()
      })
    }
  })
  return Effect.acquireRelease(
    Effect.callback<number>((resume) => {
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.server.address() as AddressInfo).port)))
    }),
    () => Effect.callback<void>((resume) => server.close(() => resume(Effect.void)))
  )
}

/** The link of a confirmation mail: base URL and token. */
export const CONFIRM_LINK = /(\S+)\/console\/confirm-address#(svr_[A-Za-z0-9_-]{43})/

export const decodeQuotedPrintable = (data: string) =>
  data.replace(/=\r?\n/g, "").replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)))

/** Posts a confirmation link's token as the console's page does. */
export const confirmAddress = (
  baseUrl: string,
  token: string,
  headers: Record<string, string> = { "x-svc-console": "1" }
) =>
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
    if (confirmed.status !== 200) {
      return yield* Effect.die(new Error(`confirming ${address}: ${confirmed.status} ${confirmed.text}`))
    }
  }).pipe(Effect.orDie)
