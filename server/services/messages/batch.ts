// Group commit for the common send: a message appended to a conversation that is not closed, with no earlier
// message under its clientMessageId. Sends that arrive in the same event-loop turn are written together by one
// statement (lock, seq, counters and insert), committed once. One statement per batch instead of a transaction of
// six round trips per message is what lets one instance carry thousands of messages a second: on loopback each
// statement costs a write syscall and a wake-up of its own, and the commit an fsync.
//
// The batch only takes the path with no decisions to make. Anything else (conversation missing, closed or not the
// visitor's, locked by another transaction, a clientMessageId seen before, a reopening whose conversation.updated
// webhook must be written with it, or the statement failing as a whole) comes back without a result, and the caller
// runs its transactional path, which owns every decision and error. Both run the one statement of rules.ts, so the
// rules of an append are the same either way. The unique index on
// (conversation_id, client_message_id) guards the race the batch cannot see: a concurrent retry makes the
// statement fail, and the retries then meet the stored message on the transactional path.
import type { StatementFactory, Statement } from '../../../db/statements.js';
import { isUuid } from '../../validation.js';
import type { Outbox } from '../webhooks/index.js';
import { APPEND_SQL, APPEND_WITH_WEBHOOKS_SQL, appendedOf, appendRow, type AppendResultRow, type AppendRow } from './rules.js';
import type { Appended, Sender, SendInput } from './types.js';

/** What a send gets from the batcher: the stored message, or null and a release for the transactional path. */
export interface BatchAnswer {
  batched: Appended | null;
  release: () => void;
}

interface Pending {
  sender: Sender;
  input: SendInput;
  resolve: (answer: BatchAnswer) => void;
}

export interface MessageBatcherOptions {
  /** Batches in flight at once; each holds one pooled connection for one statement. */
  concurrency: number;
  /** Most messages one statement carries. */
  maxBatch: number;
}

/** Counters since start: how sends went, for benchmarks and tests. */
export interface BatchStats {
  /** Statements run. */
  batches: number;
  /** Messages stored by a batch. */
  appended: number;
  /** Sends handed back to the transactional path. */
  declined: number;
  /** Batches whose statement failed as a whole (every send in it was handed back). */
  failed: number;
}

export class MessageBatcher {
  readonly stats: BatchStats = { batches: 0, appended: 0, declined: 0, failed: 0 };
  private queue: Pending[] = [];
  private running = 0;
  private scheduled = false;
  /**
   * Conversations with a send in flight, in a batch or handed back to the transactional path: their next message
   * waits until that one is stored (or refused), so one conversation's sends keep their order.
   */
  private busy = new Set<string>();

  private readonly appendStatement: Statement<AppendResultRow>;
  private readonly appendWithWebhooksStatement: Statement<AppendResultRow>;
  /** Set when webhooks are on: decides per batch whether the outbox variant of the statement runs. */
  outbox: Outbox | null = null;

  constructor(
    statement: StatementFactory,
    private readonly options: MessageBatcherOptions,
  ) {
    this.appendStatement = statement<AppendResultRow>('append_messages', APPEND_SQL);
    this.appendWithWebhooksStatement = statement<AppendResultRow>('append_messages_webhooks', APPEND_WITH_WEBHOOKS_SQL);
  }

  /**
   * Appends through a batch. When the answer has no `batched` result the send needs the transactional path, and
   * the caller must call `release` once that path is done: until then the conversation's later sends wait.
   */
  append(sender: Sender, input: SendInput): Promise<BatchAnswer> {
    if (!isUuid(input.conversationId)) {
      this.stats.declined++;
      return Promise.resolve({ batched: null, release: () => undefined });
    }
    // One spelling per conversation, so "busy" and one-per-batch hold however the client cased the id.
    const conversationId = input.conversationId.toLowerCase();
    return new Promise((resolve) => {
      this.queue.push({ sender, input: { ...input, conversationId }, resolve });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // setImmediate runs after the current poll phase: every send read from the sockets in this turn joins the batch.
    setImmediate(() => {
      this.scheduled = false;
      this.pump();
    });
  }

  private release(conversationId: string): void {
    this.busy.delete(conversationId);
    if (this.queue.length > 0) this.schedule();
  }

  private pump(): void {
    while (this.running < this.options.concurrency && this.queue.length > 0) {
      const batch: Pending[] = [];
      const rest: Pending[] = [];
      for (const p of this.queue) {
        const id = p.input.conversationId;
        if (batch.length < this.options.maxBatch && !this.busy.has(id)) {
          batch.push(p);
          this.busy.add(id);
        } else {
          rest.push(p);
        }
      }
      if (batch.length === 0) return;
      this.queue = rest;
      this.running++;
      void this.run(batch).finally(() => {
        this.running--;
        if (this.queue.length > 0) this.schedule();
      });
    }
  }

  private async run(batch: Pending[]): Promise<void> {
    const answers: BatchAnswer[] = batch.map((p) => ({ batched: null, release: () => this.release(p.input.conversationId) }));
    try {
      const { rows, input, at } = await this.write(batch);
      for (const r of rows) {
        const p = batch[r.ord]!;
        answers[r.ord] = { batched: appendedOf(r, input[r.ord]!, at), release: () => undefined };
        // Stored: the conversation's next send may go.
        this.busy.delete(p.input.conversationId);
      }
      this.stats.appended += rows.length;
      this.stats.declined += batch.length - rows.length;
    } catch {
      // Nothing was written (one statement): every send of the batch takes the transactional path, which reports
      // its own error. Their conversations stay busy until each is released.
      this.stats.failed++;
      this.stats.declined += batch.length;
    }
    batch.forEach((p, i) => p.resolve(answers[i]!));
  }

  private async write(batch: Pending[]): Promise<{ rows: AppendResultRow[]; input: AppendRow[]; at: string }> {
    this.stats.batches++;
    const orgIds = batch.map((p) => p.sender.orgId);
    // Both answers are cached per organization: an organization without webhooks costs no query.
    const [withWebhooks, reopenElsewhere] = this.outbox
      ? await Promise.all([this.outbox.wantedBy(orgIds, 'message.created'), this.outbox.wantedBy(orgIds, 'conversation.updated')])
      : [new Set<string>(), new Set<string>()];
    const input = batch.map(({ sender, input }, ord) => appendRow(ord, sender, input, { batched: true, declineReopen: reopenElsewhere.has(sender.orgId) }));
    const at = new Date().toISOString();
    if (withWebhooks.size === 0) return { rows: await this.appendStatement.rows([JSON.stringify(input), at]), input, at };
    const rows = await this.appendWithWebhooksStatement.rows([JSON.stringify(input), at]);
    // The statement committed its deliveries' jobs: without this they would wait for the queue's next poll (1 s).
    this.outbox?.written();
    return { rows, input, at };
  }
}
