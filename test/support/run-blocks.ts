/**
 * The documentation's command blocks that a test runs. A fenced block that
 * is a command or a request (`sh`, `bash`, `http`... or text that starts
 * with `curl`, `npm`, `npx` or `svc`) either is one of these or says
 * `illustrative` in its fence (```` ```sh illustrative ````):
 * test/unit/docs/examples.test.ts checks it. A block a user runs outside
 * the repository, with the packed packages, says `consumer=<name>` in its
 * fence: the packaging test (test/packaging/packages.test.ts) runs it by
 * that name, as written, in a project of its own. A runner takes its blocks from
 * `blocksRun` here, so what it runs and what the check counts as run are
 * the same list.
 */
import { type CodeBlock, codeBlocks, documentationPages, read } from "./markdown.ts"

export type { CodeBlock } from "./markdown.ts"

export interface RunSection {
  readonly page: string
  /** The `##` heading whose shell blocks run, in order. */
  readonly section: string
  /** The test that runs them. */
  readonly runner: string
}

export const RUN_SECTIONS: ReadonlyArray<RunSection> = [
  { page: "README.md", section: "Quick start", runner: "test/processes/foundation/readme.test.ts" },
  { page: "README.md", section: "Your first calls", runner: "test/processes/foundation/readme.test.ts" },
  { page: "docs/operations.md", section: "The CLI", runner: "test/processes/foundation/operations-cli.test.ts" },
  { page: "docs/approvals.md", section: "Governed steps", runner: "test/processes/agents/agent-examples.test.ts" },
  { page: "docs/approvals.md", section: "The agent loop", runner: "test/processes/agents/agent-examples.test.ts" },
  { page: "docs/approvals.md", section: "Policies", runner: "test/processes/agents/agent-examples.test.ts" },
  {
    page: "docs/approvals.md",
    section: "Rules on arguments",
    runner: "test/processes/agents/agent-examples.test.ts"
  },
  { page: "docs/approvals.md", section: "Deciding", runner: "test/processes/agents/agent-examples.test.ts" },
  { page: "docs/mcp.md", section: "An example agent", runner: "test/processes/agents/mcp-agent.test.ts" }
]

/** Languages of blocks that are commands or requests. */
export const COMMAND_LANGS: ReadonlySet<string> = new Set(["sh", "bash", "shell", "console", "zsh", "http", "curl"])

/** Whether a block is a command or a request: by its language, or by its first line. */
export const isCommand = (block: CodeBlock): boolean =>
  COMMAND_LANGS.has(block.lang) ||
  ((block.lang === "" || block.lang === "text") &&
    /^\s*(?:\$\s*)?(?:curl|npm|npx|svc)\s/.test(block.code.split("\n")[0] ?? ""))

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

/** The pages whose `consumer=` blocks the packaging test runs: the documentation and the packages' READMEs. */
export const consumerPages = (): Array<string> => [
  ...documentationPages(),
  "packages/client/README.md",
  "packages/testing/README.md",
  "packages/receiver/README.md"
]

/** A block's name for the packaging test (`consumer=<name>` in its fence), if it has one. */
export const consumerName = (block: CodeBlock): string | undefined =>
  block.flags.find((flag) => flag.startsWith("consumer="))?.slice("consumer=".length)

/** Every `consumer=` block of those pages, by name. */
export const consumerBlocks = (): Map<string, CodeBlock> => {
  const found = new Map<string, CodeBlock>()
  for (const page of consumerPages()) {
    for (const block of codeBlocks(page, read(page))) {
      const name = consumerName(block)
      if (name === undefined) continue
      if (found.has(name)) {
        throw new Error(
          `${page}:${block.line}: consumer=${name} is also ${found.get(name)!.page}:${found.get(name)!.line}`
        )
      }
      found.set(name, block)
    }
  }
  return found
}

/** Every block a runner runs, as `page:line`: the sections above, and the blocks the packaging test runs. */
export const allBlocksRun = (): Set<string> =>
  new Set([
    ...RUN_SECTIONS.flatMap(({ page, section }) =>
      blocksRun(page, section).map((block) => `${block.page}:${block.line}`)
    ),
    ...[...consumerBlocks().values()].map((block) => `${block.page}:${block.line}`)
  ])
