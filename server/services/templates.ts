// Saved response templates of an organization; the shortcut is unique per organization.
import type { Models } from '../../db/index.js';
import { containsPattern } from '../../db/search.js';
import type { Template } from '../../db/models/Template.js';
import { Conflict, NotFound } from '../errors.js';
import dbErrors from 'db-errors';

export interface TemplateInput {
  title?: string;
  content?: string;
  /** Holds no whitespace (the route's schema refuses it), so there is nothing to trim; empty is none. */
  shortcut?: string | null;
  category?: string | null;
}

export class TemplateService {
  constructor(private readonly deps: { models: Models }) {}

  private get models() {
    return this.deps.models;
  }

  async list(orgId: string, opts: { category?: string; q?: string; limit: number; offset: number }): Promise<{ templates: Template[]; total: number }> {
    const base = this.models.Template.forOrg(orgId);
    if (opts.category) base.where('category', opts.category);
    if (opts.q) {
      const like = containsPattern(opts.q);
      base.where((w) => w.whereILike('title', like).orWhereILike('shortcut', like));
    }
    const [total, templates] = await Promise.all([base.clone().resultSize(), base.clone().orderBy('title').orderBy('id').limit(opts.limit).offset(opts.offset)]);
    return { templates, total };
  }

  async get(orgId: string, id: string): Promise<Template> {
    const template = await this.models.Template.forOrg(orgId).findById(id);
    if (!template) throw new NotFound('Template');
    return template;
  }

  async create(orgId: string, userId: string, input: Required<Pick<TemplateInput, 'title' | 'content'>> & TemplateInput): Promise<Template> {
    return this.unique(() =>
      this.models.Template.forOrg(orgId).insertAndFetch({
        organizationId: orgId,
        title: input.title.trim(),
        content: input.content,
        shortcut: input.shortcut || null,
        category: input.category?.trim() || null,
        createdBy: userId,
      }),
    );
  }

  async update(orgId: string, id: string, input: TemplateInput): Promise<Template> {
    await this.get(orgId, id);
    const patch: Partial<Template> = {};
    if (input.title !== undefined) patch.title = input.title.trim();
    if (input.content !== undefined) patch.content = input.content;
    if (input.shortcut !== undefined) patch.shortcut = input.shortcut || null;
    if (input.category !== undefined) patch.category = input.category?.trim() || null;
    return this.unique(() => this.models.Template.forOrg(orgId).patchAndFetchById(id, patch));
  }

  async remove(orgId: string, id: string): Promise<void> {
    const deleted = await this.models.Template.forOrg(orgId).deleteById(id);
    if (deleted === 0) throw new NotFound('Template');
  }

  /** The only unique index besides the key is the shortcut's, so a unique violation names it. */
  private async unique<T>(write: () => PromiseLike<T>): Promise<T> {
    try {
      return await write();
    } catch (err) {
      if (err instanceof dbErrors.UniqueViolationError) throw new Conflict('Another template already uses this shortcut');
      throw err;
    }
  }
}
