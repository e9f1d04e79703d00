// Baseline: a bare node:http handler running the app's queries directly (pg on DATABASE_URL, else PGlite on the
// app's stopped data directory), without routing, validation, authentication or an ORM; plus raw bcrypt for login.
//   GET  /conversations/:id            the conversation and its messages by seq (x-org-id header)
//   POST /conversations/:id/messages   lock, bump last_seq, insert the message: one transaction
//   POST /login                        one bcrypt compare at BENCH_LOGIN_COST
//   POST /observability/ai-calls       one multi-row INSERT of aiCallRow() rows
//   GET  /contacts, GET /tickets       the lists' count and first page (crm; see crmList below)
//   POST /channels/whatsapp/inbound/:id  X-Hub-Signature-256 checked over the raw body, then the inbound_events row
//   GET  /knowledge/search?q=&limit=   the app's ranked search statement (rank, then headline the top ones)
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PGlite } from '@electric-sql/pglite';
import bcrypt from 'bcrypt';
import pg from 'pg';
import type { Condition } from '../../../db/pages.js';
import { LIST_COLUMNS as CONTACT_COLUMNS } from '../../../server/services/contacts/service.js';
import { orderSql, tagCondition, textCondition } from '../../../server/services/contacts/search.js';
import type { TicketStatus } from '../../../db/models/Ticket.js';
import { listConditions, LIST_COLUMNS as TICKET_COLUMNS } from '../../../server/services/tickets/service.js';
import { aiCallRow, type AiCallEvent } from '../../../server/services/observability.js';
import { whatsappEvents, type WhatsAppWebhook } from '../../../server/services/channels/providers/whatsapp.js';
import { rankedSearchSql, rankedSearchValues } from '../../../server/services/knowledge/search.js';
import { BENCH_APP_SECRET } from '../lib/channel-webhooks.js';
import { serveChild } from '../lib/proc.js';

/** `name`: a named prepared statement on pg (as the app runs its fixed statements), ignored on PGlite. */
type Query = (sql: string, params?: unknown[], name?: string) => Promise<Record<string, unknown>[]>;
interface Db {
  query: Query;
  tx<T>(fn: (q: Query) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

function openDb(): Db {
  if (process.env.DATABASE_URL) {
    const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
    return {
      query: async (sql, params, name) => (await (name ? pool.query({ name, text: sql, values: params }) : pool.query(sql, params))).rows,
      async tx(fn) {
        const client = await pool.connect();
        try {
          await client.query('begin');
          const result = await fn(async (sql, params) => (await client.query(sql, params)).rows);
          await client.query('commit');
          return result;
        } catch (err) {
          await client.query('rollback').catch(() => undefined);
          throw err;
        } finally {
          client.release();
        }
      },
      close: () => pool.end(),
    };
  }
  const db = new PGlite(process.env.PGLITE_DIR!);
  return {
    query: async (sql, params) => (await db.query<Record<string, unknown>>(sql, params)).rows,
    tx: (fn) => db.transaction((t) => fn(async (sql, params) => (await t.query<Record<string, unknown>>(sql, params)).rows)),
    close: () => db.close(),
  };
}

const db = openDb();
const cost = Number(process.env.BENCH_LOGIN_COST ?? 12);
const loginHash = await bcrypt.hash('bench password 0123', cost);

const AI_COLUMNS = ['organization_id', 'conversation_id', 'occurred_at', 'provider', 'model_id', 'call_type', 'latency_ms', 'success', 'input_tokens', 'output_tokens', 'total_tokens', 'estimated_cost_usd', 'error'] as const;

async function readRaw(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function readJson(req: IncomingMessage): Promise<any> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString() || '{}');
}

function send(res: ServerResponse, status: number, data: unknown): void {
  const body = JSON.stringify({ success: status < 400, data });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = req.url ?? '/';
  const orgId = String(req.headers['x-org-id'] ?? '');
  let m: RegExpExecArray | null;
  if (req.method === 'GET' && (m = /^\/conversations\/([0-9a-f-]{36})$/.exec(url))) {
    const [conversation] = await db.query('select * from conversations where id = $1 and organization_id = $2', [m[1], orgId]);
    if (!conversation) return send(res, 404, null);
    const messages = await db.query('select * from messages where organization_id = $1 and conversation_id = $2 order by seq asc', [orgId, m[1]]);
    return send(res, 200, { ...conversation, messages });
  }
  if (req.method === 'POST' && (m = /^\/conversations\/([0-9a-f-]{36})\/messages$/.exec(url))) {
    const body = await readJson(req);
    const userId = String(req.headers['x-user-id'] ?? '');
    const message = await db.tx(async (q) => {
      const [locked] = await q('select id from conversations where id = $1 and organization_id = $2 for update', [m![1], orgId]);
      if (!locked) return null;
      const [updated] = await q(
        'update conversations set last_seq = last_seq + 1, last_message_at = now(), updated_at = now(), human_joined_at = coalesce(human_joined_at, now()), first_reply_at = coalesce(first_reply_at, now()) where id = $1 returning last_seq',
        [m![1]],
      );
      const [row] = await q(
        `insert into messages (organization_id, conversation_id, seq, sender_type, sender_id, content, type, private, metadata) values ($1, $2, $3, 'agent', $4, $5, 'text', false, '{}') returning *`,
        [orgId, m![1], updated!.last_seq, userId, body.content],
      );
      return row;
    });
    return message ? send(res, 201, message) : send(res, 404, null);
  }
  if (req.method === 'POST' && url === '/login') {
    const body = await readJson(req);
    const ok = await bcrypt.compare(String(body.password ?? ''), loginHash);
    return send(res, ok ? 200 : 401, { ok });
  }
  if (req.method === 'POST' && url === '/observability/ai-calls') {
    const body = (await readJson(req)) as { events: AiCallEvent[] };
    const rows = body.events.map(aiCallRow);
    const params: unknown[] = [];
    const tuples = rows.map((r) => `(${AI_COLUMNS.map((c) => `$${params.push(r[c])}`).join(', ')})`);
    await db.query(`insert into ai_call_events (${AI_COLUMNS.join(', ')}) values ${tuples.join(', ')}`, params);
    return send(res, 201, { inserted: rows.length });
  }
  if (req.method === 'POST' && (m = /^\/channels\/whatsapp\/inbound\/([0-9a-f-]{36})$/.exec(url))) {
    const raw = await readRaw(req);
    const given = Buffer.from(String(req.headers['x-hub-signature-256'] ?? '').replace(/^sha256=/, ''));
    const expected = Buffer.from(createHmac('sha256', BENCH_APP_SECRET).update(raw).digest('hex'));
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return send(res, 401, null);
    // The same rows the app stores (one per message, deduplicated by wamid), without the job that processes them.
    const events = whatsappEvents(JSON.parse(raw.toString('utf8')) as WhatsAppWebhook);
    let stored = 0;
    for (const e of events) {
      const rows = await db.query(
        `insert into inbound_events (organization_id, channel_id, provider_id, kind, payload) values ($1, $2, $3, $4, $5) on conflict (channel_id, provider_id) do nothing returning id`,
        [orgId, m[1], e.providerId, e.payload.kind, JSON.stringify(e.payload)],
      );
      stored += rows.length;
    }
    return send(res, 200, { stored, duplicates: events.length - stored });
  }
  if (req.method === 'GET' && (url.startsWith('/contacts') || url.startsWith('/tickets'))) {
    const result = await crmList(orgId, new URL(url, 'http://x'));
    return result ? send(res, 200, result) : send(res, 404, null);
  }
  if (req.method === 'GET' && url.startsWith('/knowledge/search?')) {
    const p = new URL(url, 'http://x').searchParams;
    const rows = await db.query(SEARCH_SQL, rankedSearchValues(orgId, p.get('q') ?? '', Number(p.get('limit') ?? 10)), 'knowledge_search');
    return send(res, 200, rows.map((r) => ({ chunkId: r.id, documentId: r.source_id, title: r.title, snippet: r.snippet, score: Number(r.score) })));
  }
  send(res, 404, null);
}

/** The app's own statement text (imported, so both run the same SQL with the same parameters), prepared like the app's. */
const SEARCH_SQL = rankedSearchSql(false);

/**
 * The statement ContactService.list and TicketService.list run (db/pages.ts listPage; its columns and conditions
 * are imported, so the two stay the same SQL): the first page with each contact's identities and the total as a
 * scalar subquery, in one statement. Default page (limit 50, offset 0) and default order only.
 */
async function crmList(orgId: string, u: URL): Promise<{ items: Record<string, unknown>[]; total: number } | null> {
  const p = u.searchParams;
  const list = (table: string, columns: string, where: Condition[], order: string) => {
    const filter = where.map((c) => c.sql).join(' and ');
    const bindings = where.flatMap((c) => c.bindings);
    let n = 0;
    const sql = `select ${columns}, (select count(*) from ${table} where ${filter}) as "pageTotal" from ${table} where ${filter} order by ${order} limit ? offset ?`.replace(/\?/g, () => `$${++n}`);
    return db.query(sql, [...bindings, ...bindings, 50, 0]);
  };
  if (u.pathname === '/contacts') {
    const where: Condition[] = [{ sql: 'contacts.organization_id = ?', bindings: [orgId] }];
    const q = p.get('q');
    if (q?.trim()) where.push(textCondition(q));
    const tag = p.get('tag');
    if (tag) where.push(tagCondition(tag));
    const contacts = await list('contacts', CONTACT_COLUMNS, where, orderSql('-createdAt'));
    return { items: contacts, total: Number(contacts[0]?.pageTotal ?? 0) };
  }
  if (u.pathname === '/tickets') {
    const status = p.getAll('status').flatMap((v) => v.split(',')) as TicketStatus[];
    const where = listConditions(orgId, '', { status: status.length ? status : undefined, assignedTo: p.get('assignedTo') ?? undefined, q: p.get('q') ?? undefined });
    const tickets = await list('tickets', TICKET_COLUMNS, where, 'tickets.number desc');
    return { items: tickets, total: Number(tickets[0]?.pageTotal ?? 0) };
  }
  return null;
}

const http = createServer((req, res) => {
  handle(req, res).catch((err: Error) => {
    if (!res.headersSent) send(res, 500, { error: err.message });
  });
});
http.keepAliveTimeout = 5_000;
await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));

serveChild((http.address() as AddressInfo).port, {
  stop: async () => {
    http.closeAllConnections();
    await new Promise<void>((resolve) => http.close(() => resolve()));
    await db.close();
  },
});
