// Questions the AI could not answer: one row per normalized question, one occurrence per conversation; an admin's
// answer becomes an indexed FAQ source.
import type { Knex } from 'knex';
import type { Models } from '../../../db/index.js';
import type { UnansweredQuestion, UnansweredStatus } from '../../../db/models/UnansweredQuestion.js';
import { NotFound, ValidationFailed } from '../../errors.js';
import type { DomainEventBus } from '../../events.js';
import type { KnowledgeService } from './service.js';

/** Case, punctuation and spacing do not make a different question. */
export function normalizeQuestion(question: string): string {
  return question
    .normalize('NFKC')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim()
    .slice(0, 500);
}

export class UnansweredQuestions {
  constructor(private readonly deps: { models: Models; knex: Knex; events: DomainEventBus; knowledge: KnowledgeService }) {}

  /** Records a question for a conversation of the organization (404 otherwise); `saved` is false for a repeat in the same conversation. */
  async capture(orgId: string, conversationId: string, question: string): Promise<{ saved: boolean; id: string }> {
    const normalized = normalizeQuestion(question);
    if (!normalized) throw new ValidationFailed('The question has no words', [{ field: 'question', message: 'is empty' }]);
    const result = await this.deps.knex.transaction(async (trx) => {
      const conversation = await this.deps.models.Conversation.forOrg(orgId, trx).findById(conversationId).select('id');
      if (!conversation) throw new NotFound('Conversation');
      const [row] = (await trx('unanswered_questions')
        .insert({ organizationId: orgId, question: question.trim().slice(0, 2000), normalized })
        .onConflict(['organization_id', 'normalized'])
        .merge({ lastAskedAt: trx.fn.now(), updatedAt: trx.fn.now() })
        .returning('*')) as UnansweredQuestion[];
      const occurrence = await trx('unanswered_question_occurrences').insert({ questionId: row!.id, conversationId, organizationId: orgId }).onConflict(['question_id', 'conversation_id']).ignore().returning('question_id');
      if (occurrence.length === 0) return { saved: false, row: row! };
      const [counted] = (await trx('unanswered_questions').where({ id: row!.id }).increment('occurrences', 1).returning('*')) as UnansweredQuestion[];
      return { saved: true, row: counted! };
    });
    if (result.saved) this.deps.events.publish('knowledge.unanswered', { organizationId: orgId, question: { id: result.row.id, question: result.row.question, occurrences: result.row.occurrences, status: result.row.status } });
    return { saved: result.saved, id: result.row.id };
  }

  async list(orgId: string, opts: { status?: UnansweredStatus; sort: 'recent' | 'frequent'; limit: number; offset: number }): Promise<{ rows: UnansweredQuestion[]; total: number }> {
    const base = this.deps.models.UnansweredQuestion.forOrg(orgId);
    if (opts.status) base.where('status', opts.status);
    const page = base.clone();
    if (opts.sort === 'frequent') page.orderBy('occurrences', 'desc');
    page.orderBy('lastAskedAt', 'desc').orderBy('id');
    const [rows, total] = await Promise.all([page.limit(opts.limit).offset(opts.offset), base.clone().resultSize()]);
    return { rows, total };
  }

  count(orgId: string, status: UnansweredStatus): Promise<number> {
    return this.deps.models.UnansweredQuestion.forOrg(orgId).where('status', status).resultSize();
  }

  /** Changes the status; an `answer` creates an FAQ source (queued for indexing) and resolves the question. */
  async update(orgId: string, userId: string, id: string, input: { status?: UnansweredStatus; answer?: string }): Promise<UnansweredQuestion> {
    return this.deps.knex.transaction(async (trx) => {
      const question = await this.deps.models.UnansweredQuestion.forOrg(orgId, trx).findById(id).forUpdate();
      if (!question) throw new NotFound('Question');
      const patch: Partial<UnansweredQuestion> = {};
      if (input.answer !== undefined) {
        const source = await this.deps.knowledge.create(orgId, userId, { title: question.question.slice(0, 300), source: 'faq', content: input.answer }, trx);
        Object.assign(patch, { answer: input.answer, sourceId: source.id, status: input.status ?? 'resolved' });
      } else patch.status = input.status; // the route asks for a status or an answer
      return this.deps.models.UnansweredQuestion.forOrg(orgId, trx).patchAndFetchById(id, patch);
    });
  }
}
