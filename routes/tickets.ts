// /tickets: the agents' ticket desk (list, create, change, delete, timeline, notes, replies by mail, merge, links) and
// turning a conversation into a ticket. A ticket route answers 404 for a ticket outside the organization first.
import type { TicketStatus } from '../db/models/Ticket.js';
import { presentTicket, presentTicketEvent } from '../server/presenters/ticket.js';
import type { TicketActor } from '../server/services/tickets/index.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { email, object, pageSize, paginationQuery, params, uuid } from './schemas/common.js';
import { CLIENT_MESSAGE_ID_MAX } from '../server/limits.js';
import {
  assignedTo, description, DeliveryView, dueAt, eventText, priority, requester, searchQuery, settableStatus, tags, TICKET_STATUSES, TicketEventView, TicketView, title,
} from './schemas/tickets.js';

const tag = 'Tickets';
const agent = { kind: 'org', role: 'agent', orgFrom: 'token' } as const;
const admin = { kind: 'org', role: 'admin', orgFrom: 'token' } as const;
type Id = { ticketId: string };
const UUID = '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}';
const STATUS_LIST = `(${TICKET_STATUSES.join('|')})`;

const ticketFields = { title, description, priority, assignedTo, tags, dueAt };
const agentOf = (orgId: string, userId: string): TicketActor => ({ type: 'agent', orgId: orgId, userId });

export function ticketRoutes(s: RouteServices): AnyRoute[] {
  const load = ({ orgId, params }: { orgId: string; params: Id }) => s.tickets.get(orgId, params.ticketId);
  return [
    defineRoute({
      method: 'get', path: '/tickets', operationId: 'listTickets', tag, auth: agent,
      summary: 'Tickets of the active organization, newest first (highest number first)',
      description: 'Without `status`, every ticket but merged ones (they live on in their target). Filters combine with AND.',
      query: object({
        ...paginationQuery,
        status: { type: 'array', maxItems: 6, items: { type: 'string', pattern: `^${STATUS_LIST}(,${STATUS_LIST})*$` }, description: 'One or more statuses: repeated (`status=open&status=pending`) or comma-separated (`status=open,pending`)' },
        priority,
        assignedTo: { type: 'string', pattern: `^(me|unassigned|${UUID})$`, description: 'A user id, `me` or `unassigned`' },
        contactId: uuid,
        conversationId: uuid,
        q: searchQuery,
      }),
      response: { status: 200, description: 'Tickets', data: { type: 'array', items: TicketView }, paginated: true },
      handler: async ({ orgId, actor, query }) => {
        const status = query.status?.flatMap((v) => v.split(',')) as TicketStatus[] | undefined;
        const { tickets, total } = await s.tickets.list(orgId, actor.userId, { ...query, status });
        return { message: 'Tickets', data: tickets.map(presentTicket), pagination: { limit: query.limit, offset: query.offset, total } };
      },
    }),
    defineRoute({
      method: 'post', path: '/tickets', operationId: 'createTicket', tag, auth: agent,
      summary: 'Create a ticket (status open, source agent) with the next number of the organization',
      description: 'The requester is `contactId` (404 when not a contact of the organization) or `requester` (found or created as a contact by email), not both. With a requester email, the requester is mailed "[#number] title" as the first mail of the ticket\'s thread.',
      body: { ...object({ ...ticketFields, contactId: uuid, requester, conversationId: uuid }, ['title']), not: { type: 'object', properties: { contactId: true, requester: true }, required: ['contactId', 'requester'] } },
      response: { status: 201, description: 'Created', data: TicketView },
      handler: async ({ orgId, actor, body }) => ({ message: 'Ticket created', data: presentTicket(await s.tickets.create(agentOf(orgId, actor.userId), body)) }),
    }),
    defineRoute({
      method: 'get', path: '/tickets/:ticketId', operationId: 'getTicket', tag, auth: agent,
      summary: 'One ticket',
      params: params('ticketId'),
      response: { status: 200, description: 'Ticket', data: TicketView },
      handler: async ({ orgId, params }) => ({ message: 'Ticket', data: presentTicket(await s.tickets.get(orgId, params.ticketId)) }),
    }),
    defineRoute({
      method: 'patch', path: '/tickets/:ticketId', operationId: 'updateTicket', tag, auth: agent,
      summary: 'Change fields, assignee or status',
      description: 'Each kind of change adds a timeline event. Becoming resolved or closed mails the requester (threaded). `contactId` changes the requester to that contact (null removes both). A merged ticket cannot change (400 invalid_transition).',
      params: params('ticketId'),
      body: { ...object({ ...ticketFields, status: settableStatus, contactId: { type: ['string', 'null'], format: 'uuid' } }), minProperties: 1 },
      response: { status: 200, description: 'Updated', data: TicketView },
      load,
      handler: async ({ orgId, actor, params, body }) => ({ message: 'Ticket updated', data: presentTicket(await s.tickets.update(agentOf(orgId, actor.userId), params.ticketId, body)) }),
    }),
    defineRoute({
      method: 'delete', path: '/tickets/:ticketId', operationId: 'deleteTicket', tag, auth: admin,
      summary: 'Delete a ticket with its timeline (tickets merged into it keep their status, without mergedIntoId)',
      params: params('ticketId'),
      response: { status: 200, description: 'Deleted' },
      load,
      handler: async ({ orgId, params }) => {
        await s.tickets.remove(orgId, params.ticketId);
        return { message: 'Ticket deleted' };
      },
    }),
    defineRoute({
      method: 'post', path: '/tickets/:ticketId/notes', operationId: 'addTicketNote', tag, auth: agent,
      summary: 'An internal note on the timeline (never mailed)',
      params: params('ticketId'),
      body: object({ content: eventText }, ['content']),
      response: { status: 201, description: 'The note event', data: TicketEventView },
      load,
      handler: async ({ orgId, actor, params, body }) => ({ message: 'Note added', data: presentTicketEvent(await s.tickets.addNote(agentOf(orgId, actor.userId), params.ticketId, body.content)) }),
    }),
    defineRoute({
      method: 'post', path: '/tickets/:ticketId/replies', operationId: 'replyToTicket', tag, auth: agent,
      summary: 'Reply to the requester by mail, in the ticket\'s thread',
      description:
        'Queued in the mail outbox From "<organization> via <platform>" (MAIL_FROM\'s address), subject "[#number] title", with its own Message-ID, In-Reply-To the previous mail\'s and References the thread. A ticket without requester email: 400 validation_failed; a closed or merged ticket: 400 invalid_transition. A repeated `clientMessageId` answers 200 with the first reply and sends nothing. The status does not change.',
      params: params('ticketId'),
      body: object({ content: eventText, clientMessageId: { type: 'string', minLength: 1, maxLength: CLIENT_MESSAGE_ID_MAX }, cc: { type: 'array', maxItems: 10, uniqueItems: true, items: email } }, ['content']),
      response: { status: 201, description: 'The reply event and its delivery', data: object({ event: TicketEventView, delivery: DeliveryView }), also: { status: 200, description: 'A repeated `clientMessageId`: the reply stored the first time, not sent again' } },
      load,
      handler: async ({ orgId, actor, params, body }) => {
        const { event, delivery, duplicate } = await s.tickets.reply(agentOf(orgId, actor.userId), params.ticketId, body);
        return { status: duplicate ? 200 : 201, message: duplicate ? 'Already sent' : 'Reply sent', data: { event: presentTicketEvent(event), delivery } };
      },
    }),
    defineRoute({
      method: 'get', path: '/tickets/:ticketId/events', operationId: 'listTicketEvents', tag, auth: agent,
      summary: 'The timeline, oldest first',
      description: 'Pass the id of the last event you have as `after` to get only newer ones (an id that is not an event of this ticket: 400).',
      params: params('ticketId'),
      query: object({ after: uuid, limit: pageSize() }),
      response: { status: 200, description: 'Events', data: { type: 'array', items: TicketEventView } },
      load,
      handler: async ({ orgId, params, query }) => {
        const events = await s.tickets.events(orgId, params.ticketId, query);
        await s.attachments.decorateTicketEvents(orgId, events);
        return { message: 'Ticket events', data: events.map(presentTicketEvent) };
      },
    }),
    defineRoute({
      method: 'post', path: '/tickets/:ticketId/merge', operationId: 'mergeTicket', tag, auth: agent,
      summary: 'Merge this ticket into `targetTicketId`; answers the target',
      description: 'In one transaction: this ticket becomes `merged` (final) with mergedIntoId, tickets merged into it earlier point at the target, and both timelines get a `merged` event; mail answering this ticket\'s thread lands on the target. A closed or merged ticket on either side: 400 invalid_transition; itself: 400 validation_failed; a target outside the organization: 404. On any failure nothing changes.',
      params: params('ticketId'),
      body: object({ targetTicketId: uuid }, ['targetTicketId']),
      response: { status: 200, description: 'The target ticket', data: TicketView },
      load,
      handler: async ({ orgId, actor, params, body }) => ({ message: 'Ticket merged', data: presentTicket(await s.tickets.merge(agentOf(orgId, actor.userId), params.ticketId, body.targetTicketId)) }),
    }),
    defineRoute({
      method: 'post', path: '/tickets/:ticketId/link', operationId: 'linkTicketConversation', tag, auth: agent,
      summary: 'Link the ticket to a conversation of the organization, or unlink it with `conversationId: null`',
      params: params('ticketId'),
      body: object({ conversationId: { type: ['string', 'null'], format: 'uuid' } }, ['conversationId']),
      response: { status: 200, description: 'Linked', data: TicketView },
      load,
      handler: async ({ orgId, actor, params, body }) => ({
        message: body.conversationId ? 'Ticket linked' : 'Ticket unlinked',
        data: presentTicket(await s.tickets.link(agentOf(orgId, actor.userId), params.ticketId, body.conversationId)),
      }),
    }),
    defineRoute({
      method: 'post', path: '/conversations/:conversationId/tickets', operationId: 'createTicketFromConversation', tag, auth: agent,
      summary: 'Turn a conversation into a ticket linked to it',
      description: "The requester is the conversation's contact, else its visitor (a visitor email is found or created as a contact). The source is the conversation's channel (widget, email, whatsapp, telegram), else agent.",
      params: params('conversationId'),
      body: object({ title, priority, description }, ['title']),
      response: { status: 201, description: 'Created', data: TicketView },
      handler: async ({ orgId, actor, params, body }) => ({ message: 'Ticket created', data: presentTicket(await s.tickets.fromConversation(agentOf(orgId, actor.userId), params.conversationId, body)) }),
    }),
  ];
}
