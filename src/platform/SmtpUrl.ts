/**
 * `SVC_SMTP_URL`, checked when svc starts rather than when the first mail
 * goes: a URL nodemailer can use (`smtp:` or `smtps:`, with a host), and a
 * `from` query parameter, when given, that holds an address
 * (`src/notifications/send/Email.ts` reads it as the sender).
 */
export const isSmtpUrl = (raw: string): boolean => {
  const url = URL.parse(raw)
  if (url === null || !/^smtps?:$/.test(url.protocol) || url.hostname === "") return false
  const from = url.searchParams.get("from")
  return from === null || /\S@\S/.test(from)
}
