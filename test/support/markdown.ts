/**
 * What the documentation tests need of Markdown, read the way GitHub
 * renders it: the user-facing pages, their code blocks, their links and the
 * anchors their headings get.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { root } from "./process.ts"

/** The pages a reader of the repository sees: the README, the changelog and docs/. */
export const documentationPages = (): Array<string> => [
  "README.md",
  "CHANGELOG.md",
  ...fs.readdirSync(path.join(root, "docs")).filter((name) => name.endsWith(".md")).sort().map((name) => `docs/${name}`)
]

export const read = (page: string) => fs.readFileSync(path.join(root, page), "utf8")

export interface CodeBlock {
  readonly page: string
  /** 1-based line of the opening fence. */
  readonly line: number
  /** The fence's language, e.g. `sh`, `ts`, `python`. */
  readonly lang: string
  /** The words after the language, e.g. `no-run`. */
  readonly flags: ReadonlyArray<string>
  readonly code: string
}

/** Fenced code blocks (``` or ~~~), in order. */
export const codeBlocks = (page: string, text: string): Array<CodeBlock> => {
  const blocks: Array<CodeBlock> = []
  const lines = text.split("\n")
  for (let i = 0; i < lines.length; i++) {
    const open = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)\s*(.*)$/.exec(lines[i]!)
    if (open === null) continue
    const fence = open[1]!
    const body: Array<string> = []
    let j = i + 1
    for (; j < lines.length; j++) {
      if (new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`).test(lines[j]!)) break
      body.push(lines[j]!)
    }
    blocks.push({
      page,
      line: i + 1,
      lang: open[2]!,
      flags: open[3]!.split(/\s+/).filter((w) => w.length > 0),
      code: body.join("\n")
    })
    i = j
  }
  return blocks
}

/** The text with fenced code blocks blanked, line numbers kept. */
export const outsideFences = (text: string): string => {
  let fence: string | undefined
  return text.split("\n").map((line) => {
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)
    if (fence === undefined && marker !== null) {
      fence = marker[1]!
      return ""
    }
    if (fence !== undefined) {
      if (new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`).test(line)) fence = undefined
      return ""
    }
    return line
  }).join("\n")
}

/** The text outside fenced code blocks and inline code spans, line numbers kept. */
export const prose = (text: string): string =>
  outsideFences(text).replace(/(`+)(?:(?!\1)[^\n])+\1/g, (code) => " ".repeat(code.length))

/**
 * GitHub's anchor for a heading (github-slugger): the rendered text in lower
 * case, every character that is not a letter, a number, `-`, `_` or a space
 * removed, spaces made hyphens; a repeated slug gets `-1`, `-2`, ...
 */
export const slugsOf = (text: string): Set<string> => {
  const seen = new Map<string, number>()
  const slugs = new Set<string>()
  for (const line of outsideFences(text).split("\n")) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (heading === null) continue
    const rendered = heading[1]!
      .replace(/`([^`]*)`/g, "$1") // code spans: their text
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1") // links and images: their text
      .replace(/<[^>]+>/g, "") // inline HTML
      .replace(/(\*\*|__|\*)/g, "") // emphasis markers
    const base = rendered.toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, "").replace(/ /g, "-")
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    slugs.add(count === 0 ? base : `${base}-${count}`)
  }
  return slugs
}

export interface Link {
  readonly page: string
  readonly line: number
  readonly target: string
}

/** Inline links and images `[text](target)` outside code, with their line. */
export const linksOf = (page: string, text: string): Array<Link> =>
  prose(text).split("\n").flatMap((line, i) =>
    [...line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((match) => ({
      page,
      line: i + 1,
      target: match[1]!
    }))
  )

/**
 * Why a link is dead, or undefined when it resolves: a relative path must
 * name a file or folder of the repository, and an anchor a heading of the
 * Markdown page it points into (or of this page, for `#anchor`).
 */
export const deadLink = (link: Link, readPage: (page: string) => string | undefined): string | undefined => {
  if (/^[a-z][a-z0-9+.-]*:/i.test(link.target)) return undefined // http:, https:, mailto: — not ours to resolve offline
  const [pathPart, anchor] = link.target.split("#", 2) as [string, string | undefined]
  const targetPage = pathPart === ""
    ? link.page
    : path.posix.normalize(path.posix.join(path.posix.dirname(link.page), decodeURI(pathPart)))
  if (targetPage.startsWith("..")) return `${link.target} leaves the repository`
  const text = readPage(targetPage.replace(/\/$/, ""))
  if (text === undefined) return `${targetPage} does not exist`
  if (anchor === undefined || anchor === "") return undefined
  if (!targetPage.endsWith(".md")) return `#${anchor} points into ${targetPage}, which has no headings`
  return slugsOf(text).has(anchor) ? undefined : `${targetPage} has no heading with the anchor #${anchor}`
}

/** Reads a file or answers "" for a folder, undefined when neither exists. */
export const readRepositoryPath = (page: string): string | undefined => {
  const file = path.join(root, page)
  if (!fs.existsSync(file)) return undefined
  return fs.statSync(file).isDirectory() ? "" : fs.readFileSync(file, "utf8")
}
