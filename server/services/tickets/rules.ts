// The rules of a ticket's life: which status may follow which, what a status change stamps, and how tags look.
import type { Ticket, TicketStatus } from '../../../db/models/Ticket.js';
import { InvalidTransition } from '../../errors.js';

/** Allowed status changes. `merged` is reached only by merging; closed and merged are final. */
export const TRANSITIONS: Record<TicketStatus, readonly TicketStatus[]> = {
  open: ['in_progress', 'pending', 'resolved', 'closed'],
  in_progress: ['open', 'pending', 'resolved', 'closed'],
  pending: ['open', 'in_progress', 'resolved', 'closed'],
  resolved: ['open', 'closed'],
  closed: [],
  merged: [],
};

export const FINAL_STATUSES: readonly TicketStatus[] = ['closed', 'merged'];


export function assertTransition(from: TicketStatus, to: TicketStatus): void {
  if (!TRANSITIONS[from].includes(to)) throw new InvalidTransition(`A ${from} ticket cannot become ${to}`);
}

/** A ticket that can still be merged (as the source) or receive another ticket (as the target). */
export function assertMergeable(ticket: Ticket, role: 'source' | 'target'): void {
  if (FINAL_STATUSES.includes(ticket.status)) throw new InvalidTransition(`A ${ticket.status} ticket cannot be merged${role === 'target' ? ' into' : ''}`);
}

/** The timestamps a status change sets or clears. */
export function statusPatch(to: TicketStatus, now: Date): Partial<Ticket> {
  const patch: Partial<Ticket> = { status: to };
  if (to === 'resolved') patch.resolvedAt = now;
  if (to === 'open' || to === 'in_progress' || to === 'pending') patch.resolvedAt = null;
  if (to === 'closed' || to === 'merged') patch.closedAt = now;
  return patch;
}

/**
 * Tags are trimmed and lowercased, duplicates dropped. The routes' `tags` schema already holds the rest: at most
 * TAGS_MAX of them (so fewer once duplicates are dropped), each with a character that is not a space.
 */
export function normalizeTags(tags: string[]): string[] {
  return [...new Set(tags.map((t) => t.trim().toLowerCase()))];
}

/** A trimmed search query `q` as a ticket number: "42" or "#42". */
export function numberQuery(q: string): number | null {
  const m = /^#?(\d{1,9})$/.exec(q);
  return m ? Number(m[1]) : null;
}
