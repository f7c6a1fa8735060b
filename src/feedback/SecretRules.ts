/**
 * The ruleset of recognizable secret formats the feedback scrubber removes.
 *
 * Most of it is secretlint's maintained recommended preset
 * (`@secretlint/secretlint-rule-preset-recommend`: AWS, GCP service
 * accounts, private keys, npm, basic auth in URLs, Slack, SendGrid, Shopify,
 * Stripe, GitHub, GitLab, Grafana, OpenAI, Anthropic, Groq, Hugging Face,
 * Linear, Notion, 1Password, database connection strings, HashiCorp Vault,
 * Vercel, Databricks, Docker, Figma, Cloudflare, Tailscale), run through
 * `@secretlint/core`. Two adjustments:
 * - the AWS rule's access key id scan (`enableIDScanRule`) is on: an
 *   `AKIA...` id alone is worth removing from a training example;
 * - `secretlint-rule-filter-comments` is left out: it honours
 *   `secretlint-disable` comments, and a correction must not be able to
 *   switch the scanner off.
 *
 * Its rules' reported ranges are not trusted: each report's named value
 * is removed where it stands (`lint` below).
 *
 * The formats the preset does not cover (AWS secret access keys it misses,
 * JWTs, bearer and basic credentials in header-like strings, Google API
 * keys, Slack webhook URLs, PEM private keys whose body secretlint cannot
 * parse) are the extra rules below, modelled on gitleaks' default rules
 * (rule ids cited per rule).
 */
import { lintSource } from "@secretlint/core"
import { secretLintProfiler } from "@secretlint/profiler"
import { rules as presetRules } from "@secretlint/secretlint-rule-preset-recommend"
import type { SecretLintCoreConfig } from "@secretlint/types"
import { keywordScan } from "./KeywordScan.ts"
import { regexKeywords } from "./SecretKeywords.ts"

/** A half-open range `[start, end)` of a string that holds a secret. */
export type Range = readonly [number, number]

export interface PatternRule {
  readonly id: string
  /** Where the rule comes from (gitleaks rule id it is modelled on). */
  readonly source: string
  readonly pattern: RegExp
  /** The capture group holding the secret (0: the whole match). */
  readonly group: number
  /**
   * Lower-case strings every match contains; the pattern only runs on text
   * holding one of them (gitleaks' `keywords` prefilter).
   */
  readonly keywords: ReadonlyArray<string>
}

/**
 * Hand-written rules for formats the secretlint preset does not cover.
 * Patterns are global and use only the JavaScript regex dialect.
 */
export const patternRules: ReadonlyArray<PatternRule> = [
  {
    id: "aws-secret-access-key",
    source: "secretlint:aws",
    // secretlint's AWS rule, `["']?(AWS_?)?SECRET_?ACCESS_?KEY["']?\s*(:|=>|=)\s*["']?<40>["']?\b`,
    // misses a key that ends in `/`, `+` or `=` (no word boundary after
    // it) and one whose quotes are escaped (`\"aws_secret_access_key\": \"…\"`
    // inside a JSON string). Same names and connectors; the key ends where
    // its alphabet does. Each match starts at a fixed name: linear in the text.
    pattern: /secret[_ -]?access[_ -]?key\\?["']?\s*(?::|=>|=)\s*\\?["']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])/gi,
    group: 1,
    // Every match holds one of these (fewer keywords than the whole name's sixteen spellings).
    keywords: ["accesskey", "access_key", "access key", "access-key"]
  },
  {
    id: "jwt",
    source: "gitleaks:jwt",
    // gitleaks `jwt`: ey[a-zA-Z0-9]{17,}\.ey[a-zA-Z0-9\/\\_-]{17,}\.(?:[a-zA-Z0-9\/\\_-]{10,}={0,2})?
    pattern: /\bey[a-zA-Z0-9]{17,}\.ey[a-zA-Z0-9/\\_-]{17,}\.(?:[a-zA-Z0-9/\\_-]{10,}={0,2})?/g,
    group: 0,
    keywords: [".ey"]
  },
  {
    id: "private-key",
    source: "gitleaks:private-key",
    // gitleaks `private-key`: (?i)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S-]{64,}?KEY(?: BLOCK)?-----
    pattern: /-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S-]{64,}?KEY(?: BLOCK)?-----/gi,
    group: 0,
    keywords: ["private key"]
  },
  {
    id: "bearer-credential",
    source: "gitleaks:curl-auth-header",
    // gitleaks `curl-auth-header` finds `Authorization: Bearer <token>` in
    // curl commands; here any "Bearer <token>" in a string, where the token
    // is an RFC 6750 b64token of 16+ characters. Only the token is removed.
    pattern: /\b[Bb]earer\s+([A-Za-z0-9\-._~+/]{16,}=*)/g,
    group: 1,
    keywords: ["bearer"]
  },
  {
    id: "basic-credential",
    source: "gitleaks:curl-auth-header",
    // "Authorization: Basic <base64 user:pass>"; only the credential is removed.
    pattern: /\bBasic\s+([A-Za-z0-9+/]{12,}={0,2})(?![A-Za-z0-9+/=])/g,
    group: 1,
    keywords: ["basic"]
  },
  {
    id: "gcp-api-key",
    source: "gitleaks:gcp-api-key",
    // gitleaks `gcp-api-key`: \b(AIza[\w-]{35})(?:[\x60'"\s;]|\\[nr]|$)
    pattern: /\b(AIza[\w-]{35})(?![\w-])/g,
    group: 1,
    keywords: ["aiza"]
  },
  {
    id: "svc-api-key",
    source: "svc",
    // Any string of our API key format (`svc_` + 43 base64url characters),
    // whatever organization it belongs to, or none: a key is never kept
    // in a correction. The lookahead finds overlapping candidates
    // (`svc_svc_<key>`); `d` gives the capture's own position.
    pattern: /(?=(svc_[A-Za-z0-9_-]{43}))/dg,
    group: 1,
    keywords: ["svc_"]
  },
  {
    id: "svc-signing-secret",
    source: "svc",
    // Any string of our webhook signing secret formats: `whsec_` + 32 bytes
    // in standard base64 with its padding (secrets made now) or in base64url
    // (secrets made before).
    pattern: /(?=(whsec_[A-Za-z0-9+/_-]{43}=?))/dg,
    group: 1,
    keywords: ["whsec_"]
  },
  {
    id: "svc-console-token",
    source: "svc",
    // Console sign-in link tokens (`svl_` + 43), session cookies (`svcs_` + 43)
    // and the approval links (`sva_` + 43) and address confirmation links
    // (`svr_` + 43) of reviewer mails.
    pattern: /(?=((?:svl|svcs|sva|svr)_[A-Za-z0-9_-]{43}))/dg,
    group: 1,
    keywords: ["svl_", "svcs_", "sva_", "svr_"]
  },
  {
    id: "slack-webhook-url",
    source: "gitleaks:slack-webhook-url",
    // gitleaks `slack-webhook-url`: (?:https?://)?hooks.slack.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}
    pattern: /(?:https?:\/\/)?hooks\.slack\.com\/(?:services|workflows|triggers)\/[A-Za-z0-9+/]{43,56}/g,
    group: 0,
    keywords: ["hooks.slack.com"]
  }
]

// secretlint profiles every run by default: a `performance.mark` per rule
// and file, kept in memory for good. A long-running service must not.
secretLintProfiler.setEnabled(false)

const FILTER_COMMENTS = "@secretlint/secretlint-rule-filter-comments"
const AWS = "@secretlint/secretlint-rule-aws"

const secretlintConfig: SecretLintCoreConfig = {
  rules: presetRules
    .filter((rule) => rule.meta.id !== FILTER_COMMENTS)
    .map((rule) => ({
      id: rule.meta.id,
      rule: rule as never,
      ...(rule.meta.id === AWS ? { options: { enableIDScanRule: true } } : {})
    }))
}

export interface Finding {
  readonly ruleId: string
  readonly range: Range
}

/** Findings of the hand-written rules in `text`: only those whose keywords it holds can find anything. */
export const scanPatterns = (text: string): Array<Finding> => {
  const out: Array<Finding> = []
  // A dozen keywords: `includes` each is as quick as one pass of `keywordScan`.
  const lower = text.toLowerCase()
  for (const rule of patternRules) {
    if (!rule.keywords.some((keyword) => lower.includes(keyword))) continue
    for (const match of text.matchAll(rule.pattern)) {
      const secret = match[rule.group]
      if (secret === undefined || secret === "") continue
      const start = rule.group === 0
        ? match.index
        : match.indices?.[rule.group]?.[0] ?? match.index + match[0].indexOf(secret)
      out.push({ ruleId: rule.id, range: [start, start + secret.length] })
    }
  }
  return out
}

/** The file secretlint is told it scans: a text file. */
export const SCAN_FILE_PATH = "/correction.txt"

/** A value a rule reports shorter than this is not looked for (its range still goes). */
const MIN_REPORTED_VALUE_LENGTH = 8
/**
 * How far past its reported range a value a rule found is looked for. A
 * rule's match starts at or before its range and holds the value, its name
 * and connector before it: a window of its own, so that each report costs
 * at most this much (a correction near the body limit holds tens of
 * thousands of reports; searching the whole text for each was quadratic).
 */
const REPORTED_VALUE_WINDOW = 1024

/**
 * Findings of `config`'s rules in `text`: for each report, where the value
 * it names stands, else its range.
 *
 * A rule's range need not cover what it found: the AWS rule reports a
 * secret access key found in `AWS_SECRET_ACCESS_KEY=<key>` at the start of
 * the whole match with the key's length, so the range ends 22 characters
 * into the key and its last 18-24 characters stay. What a rule found is the
 * value its message names (`data`: `KEY`, `TOKEN`, `URI`...), so each such
 * value is removed where it stands near the range, and the range too unless
 * a value stands on it (then the text around the value, such as the name
 * in `AWS_SECRET_ACCESS_KEY=`, stays). The file name some rules name is no
 * secret.
 */
const lint = async (config: SecretLintCoreConfig, text: string): Promise<Array<Finding>> => {
  const result = await lintSource({
    source: { content: text, filePath: SCAN_FILE_PATH, contentType: "text" },
    options: { config, noPhysicFilePath: true }
  })
  const out: Array<Finding> = []
  for (const message of result.messages) {
    const [start, end] = message.range
    let covered = false
    for (const value of reportedValues(message.data)) {
      const from = Math.max(0, start - value.length)
      const at = text.slice(from, end + value.length + REPORTED_VALUE_WINDOW).indexOf(value)
      if (at < 0) continue
      const range = [from + at, from + at + value.length] as const
      out.push({ ruleId: message.ruleId, range })
      if (range[0] < end && start < range[1]) covered = true
    }
    if (!covered) out.push({ ruleId: message.ruleId, range: [start, end] })
  }
  return out
}

/** The string values a report names, less the scanned file's name and those too short to look for. */
const reportedValues = (data: unknown): ReadonlyArray<string> =>
  data === null || typeof data !== "object"
    ? []
    : Object.values(data).filter((value): value is string =>
      typeof value === "string" && value.length >= MIN_REPORTED_VALUE_LENGTH && !SCAN_FILE_PATH.includes(value)
    )

/** Drops keywords that contain another: text holding the longer one holds the shorter. */
const minimal = (keywords: Iterable<string>): ReadonlyArray<string> => {
  const sorted = [...new Set(keywords)].sort((a, b) => a.length - b.length || (a < b ? -1 : 1))
  const kept: Array<string> = []
  for (const keyword of sorted) if (!kept.some((shorter) => keyword.includes(shorter))) kept.push(keyword)
  return kept
}

/**
 * The keyword prefilter of the secretlint preset, derived from the rules
 * themselves rather than listed by hand (a list by hand drifts when the
 * preset changes). Each rule is run once on a probe text while
 * `RegExp.prototype.exec` (through which every regex method of strings and
 * regexes goes) records the expressions applied to the text, less those
 * secretlint itself applies to any text (to locate findings); the rule's
 * keywords are those of its expressions (`SecretKeywords.ts`: strings one
 * of which every match contains), united. A rule reports what its
 * expressions find in the text, so a text holding none of its keywords
 * gives it nothing to report, and it need not run.
 *
 * A rule that applies no expression to the probe or one with an expression
 * whose matches need not contain a fixed string gets no keywords and runs
 * on every text, unless it only reads files of other types than ours
 * (`OTHER_FILE_TYPES`).
 * `test/unit/feedback/prefilter.test.ts` checks that every sample secret
 * is still caught and that the cheap path is taken for ordinary text.
 */
export const deriveKeywords = async () => {
  const probe = "svc secretlint keyword probe"
  const exec = RegExp.prototype.exec
  const applied = async (config: SecretLintCoreConfig) => {
    const seen = new Map<string, RegExp>()
    RegExp.prototype.exec = function(this: RegExp, input: string) {
      if (input === probe) seen.set(`/${this.source}/${this.flags}`, new RegExp(this.source, this.flags))
      return exec.call(this, input)
    }
    try {
      await lint(config, probe)
    } finally {
      RegExp.prototype.exec = exec
    }
    return seen
  }
  const core = await applied({ rules: [] })
  const out: Array<{ readonly id: string; readonly keywords: ReadonlyArray<string> | undefined }> = []
  for (const entry of secretlintConfig.rules) {
    const seen = [...(await applied({ rules: [entry] })).entries()].filter(([key]) => !core.has(key)).map(([, regex]) =>
      regex
    )
    const found = seen.map(regexKeywords)
    out.push({
      id: entry.id,
      keywords: seen.length === 0 || found.some((k) => k === undefined)
        ? undefined
        : minimal(found.flatMap((k) => [...k!]))
    })
  }
  return out
}

type Rule = SecretLintCoreConfig["rules"][number]

let prefilter: ReturnType<typeof makePrefilter> | undefined

/**
 * Rules that only read files of given types (by `source.ext`, which the
 * text given here, `SCAN_FILE_PATH`, does not set): they can find nothing
 * in it and never run. The GCP rule reads `.json` service account keys and
 * `.p12` files only (a pasted service account key is still removed, by the
 * private key rules). `test/unit/feedback/prefilter.test.ts` checks that each finds
 * nothing in a text that holds what it looks for.
 */
export const OTHER_FILE_TYPES: ReadonlySet<string> = new Set(["@secretlint/secretlint-rule-gcp"])

const makePrefilter = async () => {
  const derived = new Map((await deriveKeywords()).map((rule) => [rule.id, rule.keywords]))
  /** Rules that run on every text (no keywords could be derived for them). */
  const always: Array<Rule> = []
  const gated: Array<{ readonly entry: Rule; readonly keywords: ReadonlyArray<string> }> = []
  for (const entry of secretlintConfig.rules) {
    if (OTHER_FILE_TYPES.has(entry.id)) continue
    const keywords = derived.get(entry.id)
    if (keywords === undefined) always.push(entry)
    else gated.push({ entry, keywords })
  }
  // `scan` finds the gated rules' keywords in a text, in one pass.
  return { always, gated, scan: keywordScan(gated.flatMap((rule) => rule.keywords)) }
}

const rulesFor = async (text: string): Promise<ReadonlyArray<Rule>> => {
  prefilter ??= makePrefilter()
  const { always, gated, scan } = await prefilter
  const present = scan.present(text)
  if (present.size === 0) return always
  const rules = [...always]
  for (const rule of gated) if (rule.keywords.some((keyword) => present.has(keyword))) rules.push(rule.entry)
  return rules
}

/** Ids of the secretlint rules the prefilter lets run on `text`. */
export const secretlintRulesFor = async (text: string): Promise<ReadonlyArray<string>> =>
  (await rulesFor(text)).map((rule) => rule.id)

/**
 * Findings of secretlint's preset in `text` (one scan of the whole text),
 * running only the rules whose keywords the text holds (and those without
 * keywords); none at all for most ordinary text.
 */
export const scanSecretlint = async (text: string): Promise<Array<Finding>> => {
  const rules = await rulesFor(text)
  return rules.length === 0 ? [] : lint({ rules: [...rules] }, text)
}

/** The whole preset on `text`, without the prefilter (for tests that compare the two). */
export const scanSecretlintUnfiltered = (text: string) => lint(secretlintConfig, text)

/** Every finding of the whole ruleset in `text`. */
export const scanText = async (text: string): Promise<Array<Finding>> => [
  ...(await scanSecretlint(text)),
  ...scanPatterns(text)
]
