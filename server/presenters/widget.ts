// The widget's admin view (everything) and its public view (what a web page may read by public key).
import type { Widget } from '../../db/models/Widget.js';
import { iso } from './time.js';

export function presentWidget(w: Widget) {
  return {
    id: w.id,
    organizationId: w.organizationId,
    publicKey: w.publicKey,
    displayName: w.displayName,
    appearance: w.appearance ?? {},
    behavior: w.behavior ?? {},
    allowedOrigins: w.allowedOrigins ?? [],
    ai: w.ai ?? {},
    collectUserInfo: w.collectUserInfo ?? {},
    createdAt: iso(w.createdAt),
    updatedAt: iso(w.updatedAt),
  };
}

export function presentPublicWidget(w: Widget) {
  const ai = w.ai ?? {};
  return {
    publicKey: w.publicKey,
    organizationId: w.organizationId,
    displayName: w.displayName,
    appearance: w.appearance ?? {},
    behavior: w.behavior ?? {},
    collectUserInfo: w.collectUserInfo ?? {},
    ai: { enabled: ai.enabled === true, ...(typeof ai.greeting === 'string' ? { greeting: ai.greeting } : {}) },
  };
}
