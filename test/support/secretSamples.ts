/**
 * Secret-shaped sample values for the scrubber's tests. They are built at
 * run time (never committed as literals, so no scanner mistakes this file
 * for a leak) and are fake: they match a format, they open nothing.
 */
import { generateKeyPairSync } from "node:crypto"

const ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
const UPPER_NUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
const HEX = "0123456789abcdef"
const LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** A deterministic pseudo-random string (seeded), so failures reproduce. */
export const chars = (alphabet: string, length: number, seed = 7): string => {
  let state = seed >>> 0 || 1
  let out = ""
  for (let i = 0; i < length; i++) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0
    out += alphabet[(state >>> 8) % alphabet.length]
  }
  return out
}

const b64url = (value: string) => Buffer.from(value, "utf8").toString("base64url")

const pem = generateKeyPairSync("rsa", { modulusLength: 1024 }).privateKey.export({ type: "pkcs1", format: "pem" })
  .toString()

export interface SecretSample {
  /** The rule that should find it (secretlint rule id or our pattern rule id). */
  readonly rule: string
  /** A string holding a secret, as a user might paste it. */
  readonly text: string
  /** The secret part of `text` that must disappear. */
  readonly secret: string
  /** A look-alike that is not a secret and must stay. */
  readonly lookalike: string
}

const sample = (
  rule: string,
  secret: string,
  lookalike: string,
  around = (s: string) => `value: ${s} end`
): SecretSample => ({
  rule,
  text: around(secret),
  secret,
  lookalike
})

export const secretSamples = (seed = 7): ReadonlyArray<SecretSample> => {
  const c = (alphabet: string, n: number) => chars(alphabet, n, seed + n)
  const awsSecret = c(ALNUM + "/+", 40)
  return [
    sample("@secretlint/secretlint-rule-aws", `AKIA${c(UPPER_NUM, 16)}`, "AKIA-is-a-prefix-not-a-key"),
    {
      rule: "@secretlint/secretlint-rule-aws",
      text: `aws_secret_access_key = ${awsSecret}`,
      secret: awsSecret,
      lookalike: "aws_secret_access_key = <put your key here>"
    },
    {
      // A key ending in `/` (or `+`, `=`): no word boundary after it, which secretlint's rule needs.
      rule: "aws-secret-access-key",
      text: `"aws_secret_access_key": "${awsSecret.slice(0, 39)}/"`,
      secret: `${awsSecret.slice(0, 39)}/`,
      lookalike: "aws_secret_access_key: see the vault"
    },
    sample("@secretlint/secretlint-rule-github", `ghp_${c(ALNUM, 36)}`, "ghp_short_token"),
    sample("@secretlint/secretlint-rule-gitlab", `glpat-${c(ALNUM, 20)}`, "glpat-tiny"),
    sample(
      "@secretlint/secretlint-rule-slack",
      `xoxb-${c("0123456789", 12)}-${c("0123456789", 13)}-${c(ALNUM, 24)}`,
      "xoxb is the bot token prefix"
    ),
    sample("@secretlint/secretlint-rule-stripe", `sk_live_${c(ALNUM, 32)}`, "sk_live_mode_flag"),
    sample("@secretlint/secretlint-rule-sendgrid", `SG.${c(ALNUM, 22)}.${c(ALNUM, 43)}`, "SG.short.value"),
    sample("@secretlint/secretlint-rule-npm", `npm_${c(ALNUM, 36)}`, "npm_package_name"),
    sample("@secretlint/secretlint-rule-shopify", `shpat_${c(HEX, 32)}`, "shpat_nope"),
    sample("@secretlint/secretlint-rule-openai", `sk-${c(ALNUM, 20)}T3BlbkFJ${c(ALNUM, 20)}`, "sk-learn is a library"),
    sample("@secretlint/secretlint-rule-anthropic", `sk-ant-api03-${c(ALNUM, 93)}AA`, "sk-ant-api03-short"),
    sample("@secretlint/secretlint-rule-docker", `dckr_pat_${c(ALNUM, 27)}`, "dckr_pat_x"),
    sample(
      "@secretlint/secretlint-rule-basicauth",
      `https://admin:${c(ALNUM, 12)}@example.com`,
      "https://example.com/admin:page"
    ),
    sample(
      "@secretlint/secretlint-rule-database-connection-string",
      `postgres://app:${c(ALNUM, 14)}@db.example.com:5432/app`,
      "the postgres database is slow"
    ),
    sample("@secretlint/secretlint-rule-privatekey", pem, "-----BEGIN PUBLIC KEY----- is public", (s) => s),
    sample(
      "jwt",
      `${b64url("{\"alg\":\"HS256\",\"typ\":\"JWT\"}")}.${b64url(`{"sub":"${c(ALNUM, 10)}","iat":1516239022}`)}.${
        c(ALNUM + "_-", 43)
      }`,
      "eyes.eyebrows.eyelids"
    ),
    sample(
      "private-key",
      `-----BEGIN ENCRYPTED PRIVATE KEY-----\n${c(ALNUM, 64)}\n${c(ALNUM, 64)}\n-----END ENCRYPTED PRIVATE KEY-----`,
      "a PRIVATE KEY block starts with -----BEGIN",
      (s) => s
    ),
    {
      rule: "bearer-credential",
      text: `Authorization: Bearer ${c(ALNUM, 40)}`,
      secret: c(ALNUM, 40),
      lookalike: "the bearer of bad news"
    },
    {
      rule: "basic-credential",
      text: `Authorization: Basic ${Buffer.from(`user:${c(ALNUM, 12)}`).toString("base64")}`,
      secret: Buffer.from(`user:${c(ALNUM, 12)}`).toString("base64"),
      lookalike: "Basic plan, billed monthly"
    },
    sample("gcp-api-key", `AIza${c(ALNUM + "_-", 35)}`, "AIzawesome"),
    sample("svc-api-key", `svc_${c(ALNUM + "_-", 43)}`, "svc_config is the settings file"),
    sample("svc-signing-secret", `whsec_${c(ALNUM + "_-", 43)}`, "whsec_ starts a signing secret"),
    sample("svc-signing-secret", `whsec_${c(ALNUM + "+/", 43)}=`, "whsec_ secrets are base64 now"),
    sample("svc-console-token", `svcs_${c(ALNUM + "_-", 43)}`, "svl_ and svcs_ start console tokens"),
    sample("svc-console-token", `sva_${c(ALNUM + "_-", 43)}`, "sva_ starts the link of a reviewer mail"),
    sample(
      "svc-console-token",
      `svr_${c(ALNUM + "_-", 43)}`,
      "svr_ starts the confirmation link of a reviewer address"
    ),
    sample(
      "slack-webhook-url",
      `https://hooks.slack.com/services/T${c(UPPER_NUM, 8)}/B${c(UPPER_NUM, 8)}/${c(ALNUM, 24)}`,
      "https://hooks.slack.com/ is where webhooks live"
    )
  ]
}

/** Strings that look a little like secrets but are ordinary answer text. */
export const ordinaryStrings: ReadonlyArray<string> = [
  "hardware",
  "The printer is on fire; call facilities.",
  "token",
  "session-42",
  "password_hint: your first pet",
  "secret_word is banana",
  "https://example.com/docs?page=2",
  "SKU-12345-XL",
  "order #A1B2C3D4E5",
  "2026-11-22T12:00:00Z",
  "Use the bearer token from the vault",
  "eyJ",
  "AKIA",
  LETTERS.slice(0, 20)
]

/**
 * How a secret is written where someone pastes it. A kind known by its own
 * shape (`ghp_…`, a PEM block, a URL with a password) stands alone in any
 * surrounding; a kind known only by what it is called (an AWS secret access
 * key, a bearer or basic credential) is written in one of its own forms,
 * and that form in any surrounding.
 */
export interface Planting {
  readonly rule: string
  readonly secret: string
  /** The text that names the secret as its kind requires (the secret alone for kinds known by their shape). */
  readonly forms: ReadonlyArray<string>
}

/** Forms that name an AWS secret access key, as configuration files and shells write it. */
const awsForms = (key: string) => [
  `AWS_SECRET_ACCESS_KEY=${key}`,
  `aws_secret_access_key = ${key}`,
  `aws_secret_access_key=${key}`,
  `"aws_secret_access_key": "${key}"`,
  `'aws_secret_access_key': '${key}'`,
  `export AWS_SECRET_ACCESS_KEY="${key}"`,
  `AWS_SECRET_ACCESS_KEY='${key}'`,
  `aws_secret_access_key: ${key}`,
  `SecretAccessKey: ${key}`,
  `"SecretAccessKey": "${key}"`,
  `secret_access_key => ${key}`
]

export const plantings = (seed = 7): ReadonlyArray<Planting> =>
  secretSamples(seed).map((sample) => {
    if (
      sample.rule === "aws-secret-access-key" ||
      (sample.rule === "@secretlint/secretlint-rule-aws" && sample.text !== `value: ${sample.secret} end`)
    ) {
      return { rule: sample.rule, secret: sample.secret, forms: awsForms(sample.secret) }
    }
    if (sample.rule === "bearer-credential") {
      return {
        rule: sample.rule,
        secret: sample.secret,
        forms: [`Bearer ${sample.secret}`, `Authorization: Bearer ${sample.secret}`]
      }
    }
    if (sample.rule === "basic-credential") {
      return {
        rule: sample.rule,
        secret: sample.secret,
        forms: [`Basic ${sample.secret}`, `Authorization: Basic ${sample.secret}`]
      }
    }
    // A URL with credentials: the password is the secret (the rest is an address).
    const password = /^[a-z]+:\/\/[^:/@]+:([^@]+)@/.exec(sample.secret)?.[1]
    return { rule: sample.rule, secret: password ?? sample.secret, forms: [sample.secret] }
  })

/** AWS secret access keys end in any base64 character, `/`, `+` and `=` included. */
export const awsSecretEndings = (seed = 7): ReadonlyArray<Planting> =>
  ["/", "+", "=", "//", "A+"].map((end) => {
    const key = chars(ALNUM + "/+", 40 - end.length, seed) + end
    return { rule: "@secretlint/secretlint-rule-aws", secret: key, forms: awsForms(key) }
  })

/**
 * Surroundings a planted form is pasted into: assignments, JSON, YAML,
 * URLs (credentials and query strings), prose, line starts and ends, and
 * punctuation right against it. A multi-line form (a PEM block) goes where
 * a line of its own may stand.
 */
export const surroundings: ReadonlyArray<(form: string) => string> = [
  (s) => s,
  (s) => `TOKEN=${s}`,
  (s) => `token = ${s}`,
  (s) => `token: ${s}`,
  (s) => `export TOKEN="${s}"`,
  (s) => `TOKEN='${s}'`,
  (s) => JSON.stringify({ config: { token: s } }),
  (s) => JSON.stringify({ config: { token: s } }, null, 2),
  (s) => `config:\n  token: ${s}\n  region: eu-west-1\n`,
  (s) => `config:\n  - "${s}"\n`,
  (s) => `https://user:${s}@example.com/path`,
  (s) => `https://example.com/callback?token=${s}&page=2`,
  (s) => `My key is ${s}, please rotate it.`,
  (s) => `${s}\nnext line`,
  (s) => `first line\n${s}`,
  (s) => `first line\n${s}\nlast line`,
  (s) => `(${s})`,
  (s) => `[${s}]`,
  (s) => `<${s}>`,
  (s) => `${s}.`,
  (s) => `${s},`,
  (s) => `${s};`,
  (s) => `"${s}"`,
  (s) => `\`${s}\``,
  (s) => `{${s}}`,
  (s) => `- ${s}\t# pasted`
]

/** Every window of `width` characters of `secret` that `text` still holds. */
export const survivingWindows = (text: string, secret: string, width = 12): ReadonlyArray<string> => {
  const out: Array<string> = []
  for (let i = 0; i + width <= secret.length; i++) {
    const window = secret.slice(i, i + width)
    if (text.includes(window)) out.push(window)
  }
  return out
}
