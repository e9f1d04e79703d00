// What an admin sees of an API key: never its secret or hash (the token is returned once, by create).
import type { ApiKey } from '../../db/models/ApiKey.js';
import { iso } from './time.js';

export function presentApiKey(k: ApiKey) {
  return {
    id: k.id,
    name: k.name,
    scopes: k.scopes,
    /** Enough of the key to tell it apart: its fixed prefix and last four characters. */
    hint: `sp_live_…${k.lastFour}`,
    botUserId: k.userId,
    createdBy: k.createdBy ?? null,
    expiresAt: iso(k.expiresAt),
    lastUsedAt: iso(k.lastUsedAt),
    revokedAt: iso(k.revokedAt),
    createdAt: iso(k.createdAt),
  };
}
