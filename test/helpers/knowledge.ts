// Knowledge test helpers.
import type { AppServer } from '../../server/server.js';
import type { SignedUp } from './factories.js';

/** Runs due indexing jobs until the source leaves queued/indexing (the poller may have taken it first). */
export async function indexed(server: AppServer, owner: SignedUp, documentId: string): Promise<Record<string, any>> {
  for (let i = 0; i < 100; i++) {
    await server.jobs.drain('knowledge-index');
    const res = await owner.api.get(`/knowledge/${documentId}`, { token: owner.accessToken });
    if (!['queued', 'indexing'].includes(res.body.data.status)) return res.body.data;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`source ${documentId} was never indexed`);
}
