// The catch-up read after a reconnect (`sync`): every socket of a restarted instance asks for it within seconds, so
// the syncs of one event-loop turn are answered by one statement (db/batched.ts), as the handshakes' callers are.
// Each answer is what the page read gives (messages after a seq, in seq order, up to a limit, public ones only for
// a visitor), after the same check: the conversation is the organization's (and the visitor's), else 404.
import { Batched } from '../../../db/batched.js';
import { rowFromJson, type Statement, type StatementFactory } from '../../../db/statements.js';
import type { Message } from '../../../db/models/Message.js';
import { NotFound } from '../../errors.js';

export interface SyncRequest {
  orgId: string;
  conversationId: string;
  afterSeq: number;
  limit: number;
  /** A visitor's sync: the conversation must be this visitor session's, and only public messages are read. */
  visitorSessionId?: string;
}

interface SyncRow {
  i: number;
  messages: Record<string, unknown>[];
}

// A row per request whose conversation is found; its messages as json (a page each, through the
// (conversation_id, seq) index). `= any(array(...))` finds the conversations by primary key.
const SYNC_SQL = `
with input as (
  select * from jsonb_to_recordset($1::jsonb) as i(i int, org uuid, conv uuid, sid uuid, after int, lim int)
)
select i.i, coalesce((
  select json_agg(m order by m.seq) from (
    select * from messages m
    where m.organization_id = i.org and m.conversation_id = i.conv and m.seq > i.after and (i.sid is null or not m.private)
    order by m.seq limit i.lim
  ) m
), '[]'::json) as messages
from input i
join conversations c on c.id = i.conv and c.organization_id = i.org and (i.sid is null or c.visitor_session_id = i.sid)
where c.id = any(array(select conv from input))`;

const INT_MAX = 2 ** 31 - 1;

export class SyncReader {
  private readonly batched: Batched<Record<string, unknown>, SyncRow>;

  constructor(statement: StatementFactory, limits: { maxBatch: number; concurrency: number }) {
    const sync: Statement<SyncRow> = statement<SyncRow>('sync_messages', SYNC_SQL);
    this.batched = new Batched(async (inputs) => {
      const rows = await sync.rows([JSON.stringify(inputs.map((input, i) => ({ i, ...input })))]);
      const out: (SyncRow | undefined)[] = new Array(inputs.length);
      for (const row of rows) out[row.i] = row;
      return out;
    }, limits);
  }

  /** The messages after `afterSeq`, oldest first (plain rows, as the page read gives them); 404 for a conversation not the caller's. */
  async read(r: SyncRequest): Promise<Message[]> {
    // seq is an integer column: nothing comes after its largest value (and a larger number would fail the batch's cast).
    const after = Math.min(r.afterSeq, INT_MAX);
    const row = await this.batched.load({ org: r.orgId, conv: r.conversationId, sid: r.visitorSessionId ?? null, after, lim: r.limit });
    if (!row) throw new NotFound('Conversation');
    return row.messages.map((m) => rowFromJson<Message>(m));
  }
}
