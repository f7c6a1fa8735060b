/**
 * A client certificate for mutual TLS, checked when an endpoint is given
 * one (docs/webhooks.md, "Endpoint authentication"): the certificate (PEM,
 * optionally followed by its chain) parses, the private key (unencrypted
 * PEM) parses and matches it, and it is valid now. What a read shows of it
 * (subject, issuer, SHA-256 fingerprint, validity) comes from here; the key
 * never leaves the secret store but for the TLS handshake.
 *
 * Parsing is Node's own (`X509Certificate`, `createPrivateKey`: OpenSSL),
 * not hand-written.
 */
import { createPrivateKey, X509Certificate } from "node:crypto"
import type { ClientCertificateView } from "../../api/EndpointAuth.ts"

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g

/** The OID of the extended key usage "TLS client authentication", and of "any". */
const CLIENT_AUTH = "1.3.6.1.5.5.7.3.2"
const ANY_USAGE = "2.5.29.37.0"

export interface CheckedCertificate {
  /** The certificates as given, leaf first, PEM. */
  readonly certificate: string
  readonly privateKey: string
  readonly view: NonNullable<ClientCertificateView>
}

/** Why a certificate is refused: the field at fault and what is wrong, never the key. */
export interface CertificateRefused {
  readonly field: "tls_client_certificate.certificate" | "tls_client_certificate.private_key"
  readonly message: string
}

/** A distinguished name on one line (`CN=a, O=b`), as OpenSSL prints it one per line. */
const oneLine = (name: string) => name.split("\n").filter((part) => part !== "").join(", ")

const certificateField = "tls_client_certificate.certificate" as const
const keyField = "tls_client_certificate.private_key" as const

/** Checks the pair at `nowMs` (the caller's clock). */
export const checkClientCertificate = (
  certificate: string,
  privateKey: string,
  nowMs: number
): CheckedCertificate | CertificateRefused => {
  const pems = certificate.match(PEM_CERTIFICATE) ?? []
  if (pems.length === 0) {
    return { field: certificateField, message: "Expected a PEM certificate (-----BEGIN CERTIFICATE-----)" }
  }
  let leaf: X509Certificate
  try {
    leaf = new X509Certificate(pems[0]!)
    for (const pem of pems.slice(1)) new X509Certificate(pem)
  } catch {
    return { field: certificateField, message: "The certificate does not parse as X.509 (PEM)" }
  }
  let key: ReturnType<typeof createPrivateKey>
  try {
    key = createPrivateKey({ key: privateKey, format: "pem" })
  } catch {
    return { field: keyField, message: "Expected an unencrypted PEM private key (PKCS#8, PKCS#1 or SEC1)" }
  }
  if (!leaf.checkPrivateKey(key)) return { field: keyField, message: "The private key does not match the certificate" }
  const notBefore = new Date(leaf.validFrom)
  const notAfter = new Date(leaf.validTo)
  if (!(notAfter.getTime() > nowMs)) {
    return { field: certificateField, message: `The certificate expired at ${notAfter.toISOString()}` }
  }
  if (notBefore.getTime() > nowMs) {
    return { field: certificateField, message: `The certificate is not valid before ${notBefore.toISOString()}` }
  }
  const usages = leaf.keyUsage
  if (usages !== undefined && !usages.includes(CLIENT_AUTH) && !usages.includes(ANY_USAGE)) {
    return {
      field: certificateField,
      message: "The certificate's extended key usage does not allow TLS client authentication"
    }
  }
  return {
    certificate: pems.join("\n"),
    privateKey,
    view: {
      subject: oneLine(leaf.subject),
      issuer: oneLine(leaf.issuer),
      fingerprint_sha256: leaf.fingerprint256,
      not_before: notBefore.toISOString(),
      not_after: notAfter.toISOString()
    }
  }
}
