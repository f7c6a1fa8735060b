/**
 * Test certificates, made at test time (never committed): a test CA and a
 * server certificate it signed for `localhost`, `127.0.0.1`, `::1` (and any
 * extra names a test asks for), plus the CA as a PEM file to point
 * `SVC_EXTRA_CA_FILE` (`SvcConfig.extraCaFile`) at.
 *
 * ```ts
 * const tls = yield* TestTls.shared            // one CA per test process
 * const config = { extraCaFile: Option.some(tls.caFile), allowedTargetCidrs: ["127.0.0.0/8", "::1/128"] }
 * const receiver = yield* HttpsReceiver.make() // serves tls.cert / tls.key
 * ```
 *
 * Generation uses `selfsigned` (pure JS over WebCrypto) with P-256 keys,
 * which takes milliseconds; `selfSignedTls()` makes a certificate that no
 * test CA signed, for "untrusted certificate" tests.
 */
import { Effect, Option } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { generate } from "selfsigned"
import type { SvcConfigShape } from "../../src/platform/Config.ts"

export interface TestCertificate {
  /** Server certificate (PEM), followed by nothing: the CA is not part of the chain. */
  readonly cert: string
  /** Server private key (PEM). */
  readonly key: string
}

export interface TestTlsMaterial extends TestCertificate {
  /** The test CA certificate (PEM). */
  readonly caCert: string
  /** The test CA private key (PEM), to sign more certificates with `issue`. */
  readonly caKey: string
  /** A file holding `caCert`: the value for `SVC_EXTRA_CA_FILE`. */
  readonly caFile: string
  /** Signs another server certificate with the same CA. */
  readonly issue: (names: SanOptions) => Promise<TestCertificate>
  /** Signs a client certificate (TLS client authentication) for `commonName`, valid over `validity` (default: now, for 30 days). */
  readonly issueClient: (
    commonName: string,
    validity?: { readonly notBeforeDate: Date; readonly notAfterDate: Date }
  ) => Promise<TestCertificate>
}

export interface SanOptions {
  /** DNS names (default `["localhost"]`). */
  readonly dnsNames?: ReadonlyArray<string>
  /** IP addresses (default `["127.0.0.1", "::1"]`). */
  readonly ips?: ReadonlyArray<string>
}

const validity = () => {
  // Start a day back so that a clock slightly behind cannot make the
  // certificate "not yet valid".
  const notBeforeDate = new Date(Date.now() - 24 * 3600 * 1000)
  const notAfterDate = new Date(Date.now() + 30 * 24 * 3600 * 1000)
  return { notBeforeDate, notAfterDate }
}

const serverExtensions = (names: SanOptions) => [
  { name: "basicConstraints" as const, cA: false, critical: true },
  { name: "keyUsage" as const, digitalSignature: true, keyEncipherment: true, critical: true },
  { name: "extKeyUsage" as const, serverAuth: true },
  {
    name: "subjectAltName" as const,
    altNames: [
      ...(names.dnsNames ?? ["localhost", "*.svc.test"]).map((value) => ({ type: 2 as const, value })),
      ...(names.ips ?? ["127.0.0.1", "::1"]).map((ip) => ({ type: 7 as const, ip }))
    ]
  }
]

const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-test-tls-"))
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A fresh test CA and a server certificate for `names` signed by it. */
export const makeTestTls = async (names: SanOptions = {}): Promise<TestTlsMaterial> => {
  const ca = await generate([{ name: "commonName", value: "svc test CA" }], {
    keyType: "ec",
    algorithm: "sha256",
    ...validity(),
    extensions: [
      { name: "basicConstraints", cA: true, critical: true },
      { name: "keyUsage", keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true }
    ]
  })
  const issue = async (san: SanOptions): Promise<TestCertificate> => {
    const leaf = await generate([{ name: "commonName", value: san.dnsNames?.[0] ?? "localhost" }], {
      keyType: "ec",
      algorithm: "sha256",
      ...validity(),
      ca: { key: ca.private, cert: ca.cert },
      extensions: serverExtensions(san)
    })
    return { cert: leaf.cert, key: leaf.private }
  }
  const issueClient = async (commonName: string, period = validity()): Promise<TestCertificate> => {
    const leaf = await generate([{ name: "commonName", value: commonName }], {
      keyType: "ec",
      algorithm: "sha256",
      ...period,
      ca: { key: ca.private, cert: ca.cert },
      extensions: [
        { name: "basicConstraints", cA: false, critical: true },
        { name: "keyUsage", digitalSignature: true, critical: true },
        { name: "extKeyUsage", clientAuth: true }
      ]
    })
    return { cert: leaf.cert, key: leaf.private }
  }
  const server = await issue(names)
  const caFile = join(tempDir(), "ca.pem")
  writeFileSync(caFile, ca.cert)
  return { ...server, caCert: ca.cert, caKey: ca.private, caFile, issue, issueClient }
}

/** A self-signed server certificate for `names` that no test CA vouches for. */
export const selfSignedTls = async (names: SanOptions = {}): Promise<TestCertificate> => {
  const pems = await generate([{ name: "commonName", value: names.dnsNames?.[0] ?? "localhost" }], {
    keyType: "ec",
    algorithm: "sha256",
    ...validity(),
    extensions: serverExtensions(names)
  })
  return { cert: pems.cert, key: pems.private }
}

let shared: Promise<TestTlsMaterial> | undefined

export const TestTls = {
  /**
   * One test CA and `localhost`/`127.0.0.1`/`::1` certificate per test
   * process (memoised), so every receiver of a test file shares the CA file
   * given to the service.
   */
  shared: Effect.promise(() => (shared ??= makeTestTls())),
  /** A fresh CA and certificate (e.g. with extra DNS names). */
  make: (names: SanOptions = {}) => Effect.promise(() => makeTestTls(names)),
  /** A self-signed certificate outside every test CA. */
  selfSigned: (names: SanOptions = {}) => Effect.promise(() => selfSignedTls(names))
}

/** Writes PEM text to a temp file (removed at exit) and answers its path. */
export const writePemFile = (pem: string, name = "bundle.pem"): string => {
  const file = join(tempDir(), name)
  writeFileSync(file, pem)
  return file
}

/**
 * The configuration that lets `svc` reach receivers on loopback: the test
 * CA trusted beside the system store, and loopback (only) allowed as a
 * target although not public. `SvcTest.layer({ config: loopbackTargets(tls) })`.
 */
export const loopbackTargets = (
  material: Pick<TestTlsMaterial, "caFile">
): Pick<SvcConfigShape, "allowedTargetCidrs" | "extraCaFile"> => ({
  allowedTargetCidrs: ["127.0.0.0/8", "::1/128"],
  extraCaFile: Option.some(material.caFile)
})
