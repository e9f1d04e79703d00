// Ticket routes of the internal AI service (x-ai-tool-secret). `organizationId` is required and every conversation,
// contact and ticket named is looked up inside it: anything outside answers 404 like a cross-tenant id.
import { presentTicket } from '../server/presenters/ticket.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { email, object, params, personName, uuid } from './schemas/common.js';
import { description, dueAt, idempotencyKey, priority, settableStatus, tags, TicketView, title } from './schemas/tickets.js';

const tag = 'Tickets (AI service)';
const ai = { kind: 'ai' } as const;
const note = { type: 'string', minLength: 1, maxLength: 5000, pattern: '^[^\\u0000]*\\S[^\\u0000]*$' } as const;

export function ticketAiRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'post', path: '/tickets/ai', operationId: 'aiCreateTicket', tag, auth: ai,
      summary: 'Create a ticket (source ai), idempotently by `idempotencyKey`',
      description:
        'The first request with a key answers 201. The same key with the same body answers 200 with that ticket, also while the first request is still running (the replay waits for it); the same key with another body answers 409. Keys are unique per organization for 30 days. The requester is `contactId`, else `requesterEmail` (found or created as a contact), else the conversation\'s contact or visitor.',
      body: object(
        { organizationId: uuid, idempotencyKey, title, description: { ...description, type: 'string' }, priority, conversationId: uuid, contactId: uuid, requesterName: personName, requesterEmail: email },
        ['organizationId', 'idempotencyKey', 'title'],
      ),
      response: { status: 201, description: 'Created (200: the ticket of an earlier request with this key)', data: TicketView, also: { status: 200, description: 'A replay of `idempotencyKey` with the same body: the ticket of the first request' } },
      errors: [404, 409],
      handler: async ({ body }) => {
        const { organizationId, ...input } = body;
        const { ticket, created } = await s.tickets.ai.create(organizationId, input);
        return { status: created ? 201 : 200, message: created ? 'Ticket created' : 'Ticket already created with this key', data: presentTicket(ticket) };
      },
    }),
    defineRoute({
      method: 'get', path: '/tickets/ai/status', operationId: 'aiTicketStatus', tag, auth: ai,
      summary: "The tickets of the conversation's contact (without a contact: the conversation's own), newest first, merged ones left out, at most 50",
      query: object({ organizationId: uuid, conversationId: uuid }, ['organizationId', 'conversationId']),
      response: { status: 200, description: 'Tickets', data: object({ contactId: { type: ['string', 'null'], format: 'uuid' }, tickets: { type: 'array', items: TicketView } }) },
      errors: [404],
      handler: async ({ query }) => {
        const { contactId, tickets } = await s.tickets.ai.status(query.organizationId, query.conversationId);
        return { message: 'Tickets', data: { contactId, tickets: tickets.map(presentTicket) } };
      },
    }),
    defineRoute({
      method: 'patch', path: '/tickets/ai/:ticketId', operationId: 'aiUpdateTicket', tag, auth: ai,
      summary: 'Change fields or status of a ticket',
      description: 'Status rules as PATCH /tickets/{ticketId}. With `idempotencyKey`, a replay answers 200 with the ticket and applies nothing again; the same key with another body is 409.',
      params: params('ticketId'),
      body: { ...object({ organizationId: uuid, idempotencyKey, title, description, priority, status: settableStatus, tags, dueAt }, ['organizationId']), minProperties: 2 },
      response: { status: 200, description: 'Updated', data: TicketView },
      errors: [409],
      handler: async ({ params, body }) => {
        const { organizationId, ...input } = body;
        return { message: 'Ticket updated', data: presentTicket(await s.tickets.ai.update(organizationId, params.ticketId, input)) };
      },
    }),
    defineRoute({
      method: 'patch', path: '/tickets/ai/:ticketId/close', operationId: 'aiCloseTicket', tag, auth: ai,
      summary: 'Close a ticket and mail the requester; closing a closed ticket changes and sends nothing',
      description: 'The resolution note is kept on the timeline (the status_changed event\'s content), not mailed. A merged ticket: 400 invalid_transition.',
      params: params('ticketId'),
      body: object({ organizationId: uuid, resolutionNote: note, idempotencyKey }, ['organizationId']),
      response: { status: 200, description: 'Closed', data: TicketView },
      errors: [409],
      handler: async ({ params, body }) => {
        const { organizationId, ...input } = body;
        return { message: 'Ticket closed', data: presentTicket(await s.tickets.ai.close(organizationId, params.ticketId, input)) };
      },
    }),
  ];
}
