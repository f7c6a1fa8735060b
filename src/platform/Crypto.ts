/**
 * Secrets at rest and credential material. Node's `crypto` (OpenSSL) does
 * the cryptography; this module only fixes formats.
 */
import { Context, Data, Effect, Layer, Option, Redacted } from "effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { SvcConfig } from "./Config.ts"
import { ensurePrivateDir } from "./DataDir.ts"

/** `prefix` + `bytes` random bytes in base64url. */
export const randomToken = (prefix: string, bytes = 32) => prefix + crypto.randomBytes(bytes).toString("base64url")

// Trace ids come from random bytes drawn 4 KiB at a time: one
// `randomBytes` call per new trace cost about 20 µs per request.
let pool = Buffer.alloc(0)
let offset = 0

/** A random W3C trace id (32 lowercase hex, never all zero), from the system's CSPRNG. */
export const randomTraceId = (): string => {
  for (;;) {
    if (offset + 16 > pool.length) {
      pool = crypto.randomBytes(4096)
      offset = 0
    }
    const id = pool.toString("hex", offset, offset + 16)
    offset += 16
    if (id !== "00000000000000000000000000000000") return id
  }
}

export class MasterKeyError extends Data.TaggedError("MasterKeyError")<{ readonly message: string }> {}

export class SecretDecryptionFailed extends Data.TaggedError("SecretDecryptionFailed")<{
  readonly context: string
}> {}

const decodeMasterKey = (encoded: string) => {
  const key = Buffer.from(encoded.trim(), "base64")
  return key.length === 32
    ? Effect.succeed(key)
    : Effect.fail(new MasterKeyError({ message: "SVC_MASTER_KEY must be 32 bytes in base64" }))
}

/**
 * Encrypts secrets (webhook signing secrets, collector headers) with
 * AES-256-GCM under the master key. The `context` (e.g. `endpoint:<id>`) is
 * bound as associated data, so a ciphertext copied to another row fails to
 * open.
 */
export class SecretBox extends Context.Service<SecretBox, {
  readonly seal: (plaintext: string, context: string) => string
  readonly open: (sealed: string, context: string) => Effect.Effect<Redacted.Redacted<string>, SecretDecryptionFailed>
  /**
   * HMAC-SHA256 of `message` (base64url) under a key derived from the master
   * key for `purpose` alone (HKDF), so values the service hands out and
   * takes back (pagination cursors) cannot be forged or moved between uses.
   */
  readonly mac: (purpose: string, message: string) => string
}>()("svc/platform/SecretBox") {
  static readonly make = (key: Uint8Array) => {
    const macKeys = new Map<string, Buffer>()
    const macKey = (purpose: string) => {
      let derived = macKeys.get(purpose)
      if (derived === undefined) {
        derived = Buffer.from(crypto.hkdfSync("sha256", key, Buffer.alloc(0), `svc mac ${purpose}`, 32))
        macKeys.set(purpose, derived)
      }
      return derived
    }
    return SecretBox.of({
      mac: (purpose, message) =>
        crypto.createHmac("sha256", macKey(purpose)).update(message, "utf8").digest("base64url"),
      seal: (plaintext, context) => {
        const iv = crypto.randomBytes(12)
        const cipher = crypto.createCipheriv("aes-256-gcm", key, iv)
        cipher.setAAD(Buffer.from(context, "utf8"))
        const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final(), cipher.getAuthTag()])
        return `v1.${iv.toString("base64url")}.${body.toString("base64url")}`
      },
      open: (sealed, context) =>
        Effect.try({
          try: () => {
            const [version, iv, body] = sealed.split(".")
            if (version !== "v1" || iv === undefined || body === undefined) throw new Error("format")
            const bytes = Buffer.from(body, "base64url")
            const decipher = crypto.createDecipheriv("aes-256-gcm", key, Buffer.from(iv, "base64url"))
            decipher.setAAD(Buffer.from(context, "utf8"))
            decipher.setAuthTag(bytes.subarray(bytes.length - 16))
            const plain = Buffer.concat([decipher.update(bytes.subarray(0, bytes.length - 16)), decipher.final()])
            return Redacted.make(plain.toString("utf8"))
          },
          catch: () => new SecretDecryptionFailed({ context })
        })
    })
  }

  /**
   * The master key from `SVC_MASTER_KEY`. Without it, an embedded
   * deployment generates one into `SVC_DATA_DIR/master.key` (mode 0600) on
   * first start; a PostgreSQL deployment must set it, because several
   * processes must share it.
   */
  static readonly layer = Layer.effect(
    SecretBox,
    Effect.gen(function*() {
      const config = yield* SvcConfig
      if (Option.isSome(config.masterKey)) {
        return SecretBox.make(yield* decodeMasterKey(Redacted.value(config.masterKey.value)))
      }
      if (Option.isSome(config.databaseUrl)) {
        return yield* new MasterKeyError({
          message: "SVC_MASTER_KEY is required with DATABASE_URL (32 random bytes, base64)"
        })
      }
      const dir = path.resolve(config.dataDir)
      const file = path.join(dir, "master.key")
      yield* ensurePrivateDir(dir).pipe(Effect.mapError((error) => new MasterKeyError({ message: error.message })))
      const key = yield* Effect.try({
        try: () => {
          if (!fs.existsSync(file)) {
            // Written whole under a private name, then linked into place:
            // of processes starting together on a new data directory, one
            // key wins and every one reads it complete.
            const temp = `${file}.${process.pid}.${crypto.randomBytes(4).toString("hex")}`
            fs.writeFileSync(temp, crypto.randomBytes(32).toString("base64") + "\n", { mode: 0o600, flag: "wx" })
            try {
              fs.linkSync(temp, file)
            } catch (error) {
              if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
            } finally {
              fs.rmSync(temp, { force: true })
            }
          }
          return fs.readFileSync(file, "utf8")
        },
        catch: (cause) => new MasterKeyError({ message: `cannot read or create ${file}: ${String(cause)}` })
      })
      return SecretBox.make(yield* decodeMasterKey(key))
    })
  )

  /** A random key that lives as long as the layer (tests, in-memory databases). */
  static readonly layerEphemeral = Layer.sync(SecretBox, () => SecretBox.make(crypto.randomBytes(32)))
}
