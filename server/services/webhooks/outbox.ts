// The outbox port services call inside their transactions; the webhook service implements it.
import type { Knex } from 'knex';

/** The event's `data`, or a function building it (run only when some subscription wants the event). */
export type EventData = Record<string, unknown> | (() => Promise<Record<string, unknown>> | Record<string, unknown>);

export interface Outbox {
  /** Writes a delivery (and its job) per enabled subscription wanting `type`, in the caller's transaction. */
  record(trx: Knex.Transaction, orgId: string, type: string, data: EventData): Promise<void>;
  /** A public message's message.created: one fan-out job, in the caller's transaction, that writes the deliveries later. */
  recordMessage(trx: Knex.Transaction, orgId: string, messageId: string): Promise<void>;
  /** Those of these organizations with an enabled subscription wanting `type` (cached; for the batched message path). */
  wantedBy(orgIds: string[], type: string): Promise<Set<string>>;
  /** Fan-out jobs were written by a committed statement of the caller's own (the batched message path): run them soon. */
  written(): void;
}
