/**
 * Tasks by name, told apart: two tasks may share a name, so where a name
 * is not unique its label adds when the task was made and the end of its
 * id (the start of a time-ordered id is the same for ids made together).
 */
import { formatTime } from "./ui.tsx"

interface TaskLike {
  readonly id: string
  readonly name: string
  readonly created_at: string
}

/** The end of an id, enough to tell apart ids made in the same second. */
export const shortId = (id: string) => `…${id.slice(-8)}`

/** Each task's label by id: its name, and for a name that several tasks share, its creation time and short id. */
export const taskLabels = (tasks: ReadonlyArray<TaskLike>): Map<string, string> => {
  const count = new Map<string, number>()
  for (const task of tasks) count.set(task.name, (count.get(task.name) ?? 0) + 1)
  return new Map(tasks.map((task) => [
    task.id,
    (count.get(task.name) ?? 0) > 1
      ? `${task.name} (created ${formatTime(task.created_at)}, id ${shortId(task.id)})`
      : task.name
  ]))
}
