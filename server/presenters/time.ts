// Timestamps leave the server as ISO 8601 UTC strings (null stays null).
export function iso(d: Date | string): string;
export function iso(d: Date | string | null | undefined): string | null;
export function iso(d: Date | string | null | undefined): string | null {
  return d ? new Date(d).toISOString() : null;
}
