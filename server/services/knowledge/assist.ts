// Agent assist: for a conversation, the organization's knowledge passages and templates that best match what the
// visitor last wrote, computed locally; and, when AI_ASSIST_URL is set, the AI service's suggestion, asked with a
// timeout so a slow or failing service never holds anything up (failures are only logged).
import type { Knex } from 'knex';
import type { Models } from '../../../db/index.js';
import { NotFound } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { StatementFactory } from '../../../db/statements.js';
import { anyWordsQuery, searchChunks, type SearchHit } from './search.js';

export interface TemplateHit {
  templateId: string;
  title: string;
  content: string;
  shortcut: string | null;
  score: number;
}

export interface LocalAssist {
  conversationId: string;
  /** The visitor text the suggestions answer. */
  query: string;
  passages: SearchHit[];
  templates: TemplateHit[];
}

const VISITOR_MESSAGES = 3;
const AI_TIMEOUT_MS = 8_000;
const MAX_SUGGESTION_CHARS = 20_000;

export class AssistService {
  constructor(private readonly deps: { models: Models; knex: Knex; statement: StatementFactory; logger: Logger; aiAssistUrl: string | null; aiToolSecret: string | null }) {}

  get forwards(): boolean {
    return !!this.deps.aiAssistUrl;
  }

  async local(orgId: string, conversationId: string): Promise<LocalAssist> {
    const conversation = await this.deps.models.Conversation.forOrg(orgId).findById(conversationId).select('id');
    if (!conversation) throw new NotFound('Conversation');
    const recent = (await this.deps.knex('messages')
      .where({ organizationId: orgId, conversationId, senderType: 'visitor', private: false })
      .orderBy('seq', 'desc')
      .limit(VISITOR_MESSAGES)
      .select('content')) as { content: string }[];
    const query = recent.reverse().map((m) => m.content).join('\n').slice(0, 4000);
    if (!query.trim()) return { conversationId, query, passages: [], templates: [] };
    const [passages, templates] = await Promise.all([searchChunks(this.deps, orgId, query, { limit: 5, match: 'any' }), this.templates(orgId, query)]);
    return { conversationId, query, passages, templates };
  }

  /** Templates ranked by the same full-text match (computed on the fly: an organization has few templates). */
  private async templates(orgId: string, text: string): Promise<TemplateHit[]> {
    const words = anyWordsQuery(text);
    if (!words) return [];
    const result = await this.deps.knex.raw(
      `select t.id, t.title, t.content, t.shortcut, ts_rank_cd(v.doc, q.query) as score
         from templates t
         cross join lateral (select to_tsvector('english', t.title || ' ' || t.content) as doc) v,
         websearch_to_tsquery('english', ?) as q(query)
        where t.organization_id = ? and v.doc @@ q.query
        order by score desc, t.id
        limit 3`,
      [words, orgId],
    );
    return (result.rows as { id: string; title: string; content: string; shortcut: string | null; score: number }[]).map((r) => ({ templateId: r.id, title: r.title, content: r.content, shortcut: r.shortcut, score: Number(r.score) }));
  }

  /** The AI service's suggestion, or null when it is not configured, slow, failing or answers nonsense. */
  async suggestion(orgId: string, local: LocalAssist, requestedBy: string): Promise<Record<string, unknown> | null> {
    if (!this.deps.aiAssistUrl) return null;
    try {
      const res = await fetch(this.deps.aiAssistUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-ai-tool-secret': this.deps.aiToolSecret ?? '' },
        body: JSON.stringify({ organizationId: orgId, conversationId: local.conversationId, requestedBy, query: local.query, passages: local.passages, templates: local.templates }),
        signal: AbortSignal.timeout(AI_TIMEOUT_MS),
      });
      const text = await res.text();
      if (!res.ok) throw new Error(`the AI service answered ${res.status}`);
      if (text.length > MAX_SUGGESTION_CHARS) throw new Error('the AI service answered too much');
      const body = JSON.parse(text) as unknown;
      // An envelope `{ data }` holds the answer, whatever it is: `{ data: null }` means no suggestion.
      const value = body && typeof body === 'object' ? ('data' in body ? (body as { data: unknown }).data : body) : null;
      const suggestion = value && typeof value === 'object' && 'suggestion' in value ? (value as { suggestion: unknown }).suggestion : value;
      if (typeof suggestion === 'string') return { text: suggestion };
      return suggestion && typeof suggestion === 'object' && !Array.isArray(suggestion) ? (suggestion as Record<string, unknown>) : null;
    } catch (err) {
      this.deps.logger.warn({ err, organizationId: orgId, conversationId: local.conversationId }, 'the AI assist request failed');
      return null;
    }
  }
}
