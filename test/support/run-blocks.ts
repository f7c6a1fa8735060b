/**
 * The documentation's command blocks that a test runs. A fenced block that
 * is a command or a request (`sh`, `bash`, `http`... or text that starts
 * with `curl`, `npm`, `npx` or `svc`) either is one of these or says
 * `illustrative` in its fence (```` ```sh illustrative ````):
 * test/unit/docs/examples.test.ts checks it. A runner takes its blocks from
 * `blocksRun` here, so what it runs and what the check counts as run are
 * the same list.
 */
import { type CodeBlock, codeBlocks, read } from "./markdown.ts"

export interface RunSection {
  readonly page: string
  /** The `##` heading whose shell blocks run, in order. */
  readonly section: string
  /** The test that runs them. */
  readonly runner: string
}

export const RUN_SECTIONS: ReadonlyArray<RunSection> = [
  { page: "README.md", section: "Quick start", runner: "test/integration/foundation/readme.test.ts" },
  { page: "README.md", section: "Your first calls", runner: "test/integration/foundation/readme.test.ts" },
  { page: "docs/operations.md", section: "The CLI", runner: "test/integration/foundation/operations-cli.test.ts" },
  { page: "docs/approvals.md", section: "Governed steps", runner: "test/integration/approvals/agent-examples.test.ts" },
  { page: "docs/approvals.md", section: "The agent loop", runner: "test/integration/approvals/agent-examples.test.ts" },
  { page: "docs/approvals.md", section: "Policies", runner: "test/integration/approvals/agent-examples.test.ts" },
  { page: "docs/approvals.md", section: "Rules on arguments", runner: "test/integration/approvals/agent-examples.test.ts" },
  { page: "docs/approvals.md", section: "Deciding", runner: "test/integration/approvals/agent-examples.test.ts" }
]

/** Languages of blocks that are commands or requests. */
export const COMMAND_LANGS: ReadonlySet<string> = new Set(["sh", "bash", "shell", "console", "zsh", "http", "curl"])

/** Whether a block is a command or a request: by its language, or by its first line. */
export const isCommand = (block: CodeBlock): boolean =>
  COMMAND_LANGS.has(block.lang) ||
  ((block.lang === "" || block.lang === "text") && /^\s*(?:\$\s*)?(?:curl|npm|npx|svc)\s/.test(block.code.split("\n")[0] ?? ""))

export const isIllustrative = (block: CodeBlock): boolean => block.flags.includes("illustrative")

/** The shell blocks under one `##` heading of a page, in order: what the runner of that section runs. */
export const blocksRun = (page: string, section: string, text: string = read(page)): Array<CodeBlock> => {
  const start = text.indexOf(`\n## ${section}\n`)
  if (start < 0) return []
  const end = text.indexOf("\n## ", start + 1)
  const before = text.slice(0, start).split("\n").length
  return codeBlocks(page, text.slice(start, end === -1 ? undefined : end))
    .filter((block) => block.lang === "sh" && !isIllustrative(block))
    .map((block) => ({ ...block, line: block.line + before - 1 }))
}

/** Every block a runner runs, as `page:line`. */
export const allBlocksRun = (): Set<string> =>
  new Set(RUN_SECTIONS.flatMap(({ page, section }) => blocksRun(page, section).map((block) => `${block.page}:${block.line}`)))
