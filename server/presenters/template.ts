import type { Template } from '../../db/models/Template.js';
import { iso } from './time.js';

export function presentTemplate(t: Template) {
  return {
    id: t.id,
    title: t.title,
    content: t.content,
    shortcut: t.shortcut ?? null,
    category: t.category ?? null,
    createdBy: t.createdBy ?? null,
    createdAt: iso(t.createdAt),
    updatedAt: iso(t.updatedAt),
  };
}
