// Tickets: numbered customer requests with a timeline, mail threads, merges and the AI service's idempotent actions.
export { TicketService, type TicketFilters, type ReplyDelivery, type ReplyInput } from './service.js';
export { TicketAiService, type AiTicketInput } from './ai.js';
export { TicketMailer, ticketSender, ticketSubject } from './mail.js';
export { IdempotencyKeys, requestHash } from './idempotency.js';
export { TRANSITIONS } from './rules.js';
export type { NewTicket, TicketAction, TicketActor, TicketChanges } from './core.js';
