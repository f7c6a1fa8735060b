/**
 * What a child process started by `startProcessWorker` (`ProcessWorker.ts`)
 * calls: apart from it so that the child loads no `child_process` nor the
 * pool's modules.
 */

/**
 * Tells the parent which step of request `id` the child is in. The
 * message is written to the channel at once (when its pipe has room), so
 * it arrives even when a long native step follows.
 */
export const reportProgress = (id: number, value: number) => {
  process.send?.({ id, progress: value })
}

/** The child ends when its parent does (the channel closes), whatever it was waiting for. */
export const exitWithParent = () => {
  process.on("disconnect", () => process.exit(0))
}
