// Timestamps leave the server as ISO 8601 UTC strings (null stays null).
export function iso(d: Date | string): string;
export function iso(d: Date | string | null | undefined): string | null;
export function iso(d: Date | string | null | undefined): string | null {
  if (!d) return null;
  // Rows carry Dates; only a few callers hand in strings. No copy for the common case (50 per conversation read).
  return d instanceof Date ? d.toISOString() : new Date(d).toISOString();
}
