// Text search helpers shared by the services' list filters.

/** A LIKE/ILIKE pattern matching `text` anywhere, with the user's %, _ and \ taken literally. */
export function containsPattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}
