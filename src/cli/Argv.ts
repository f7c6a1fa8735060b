/**
 * The command line as `main.ts` and `Program.ts` read it: whether it only
 * asks for help, the version, the wizard or completions, which the CLI
 * answers without a database.
 */
export const argv = process.argv.slice(2)

export const local = argv.length === 0 ||
  argv.some((arg) => ["--help", "-h", "--version", "--wizard", "--completions"].includes(arg.split("=")[0]!))
