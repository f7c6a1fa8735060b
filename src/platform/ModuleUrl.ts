/**
 * The URL of a module beside the caller, for `new Worker(...)`: named by
 * its source file (`./embedded-worker.ts`), it is that file when svc runs
 * from source and the compiled `.js` when it runs from dist/ (the installed
 * package), where no `.ts` file exists.
 */
const compiled = !import.meta.url.endsWith(".ts")

export const siblingModule = (sourceName: string, callerUrl: string): URL =>
  new URL(compiled ? sourceName.replace(/\.ts$/, ".js") : sourceName, callerUrl)
