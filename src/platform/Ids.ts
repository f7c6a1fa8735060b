import { v7 } from "uuid"

/**
 * Time-ordered UUIDs (v7): index-friendly and roughly creation-ordered, which
 * keeps inserts local in B-trees.
 */
export const newId = (): string => v7()
