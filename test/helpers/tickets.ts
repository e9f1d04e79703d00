// Ticket test helpers: success bodies, creating tickets and calling the AI service's ticket routes.
import { expect } from 'chai';
import type { ApiResponse } from './http.js';
import { Api } from './http.js';
import { TEST_AI_SECRET } from './server.js';
import type { Member, SignedUp } from './factories.js';

/** Asserts the success envelope with `status` and returns `data`. */
export function ok(res: ApiResponse, status: number): any {
  expect(res.status, JSON.stringify(res.body)).to.equal(status);
  expect(res.body.success).to.equal(true);
  return res.body.data;
}

export type Caller = Pick<SignedUp | Member, 'api' | 'accessToken'>;

export async function createTicket(who: Caller, body: Record<string, unknown> = {}): Promise<any> {
  return ok(await who.api.post('/tickets', { title: 'Printer is on fire', ...body }, { token: who.accessToken }), 201);
}

export async function patchTicket(who: Caller, id: string, body: Record<string, unknown>): Promise<ApiResponse> {
  return who.api.patch(`/tickets/${id}`, body, { token: who.accessToken });
}

export async function events(who: Caller, id: string, query = ''): Promise<any[]> {
  return ok(await who.api.get(`/tickets/${id}/events${query}`, { token: who.accessToken }), 200);
}

/** A client of the AI service's routes (x-ai-tool-secret). */
export function aiClient(baseUrl: string, secret = TEST_AI_SECRET) {
  const api = new Api(baseUrl);
  const headers = { 'x-ai-tool-secret': secret };
  return {
    post: (path: string, body: unknown) => api.post(path, body, { headers }),
    patch: (path: string, body: unknown) => api.patch(path, body, { headers }),
    get: (path: string) => api.get(path, { headers }),
  };
}
