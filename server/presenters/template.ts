import type { Template } from '../../db/models/Template.js';

export function presentTemplate(t: Template) {
  return {
    id: t.id,
    title: t.title,
    content: t.content,
    shortcut: t.shortcut ?? null,
    category: t.category ?? null,
    createdBy: t.createdBy ?? null,
    createdAt: new Date(t.createdAt).toISOString(),
    updatedAt: new Date(t.updatedAt).toISOString(),
  };
}
