// Processing a stored inbound event (a job, so a crash between storing and processing still processes it): a mail
// answering a ticket joins the ticket; anything else joins its contact's open conversation on the channel, through
// the one send path, so agents hear `new_message` as for widget chats. WhatsApp statuses update deliveries.
// Events claimed together are processed together: their rows, their channels, their senders' contacts and open
// conversations are each read by one statement for all of them, their messages are written by the message path's
// batch, and their outcomes recorded (a one-event job's end with them) by one statement. Events of one sender run
// one after another, so a burst from a new customer opens one conversation, in the order the events arrived.
import type { Knex } from 'knex';
import type { Conversation } from '../../../db/models/Conversation.js';
import type { Ticket } from '../../../db/models/Ticket.js';
import { finishJobsSql, JOB_FINISHED, type Job } from '../../jobs/index.js';
import { KeyedLimit } from '../../jobs/keyedLimit.js';
import { tickBatch } from '../../jobs/tickBatch.js';
import type { ContactService } from '../contacts/index.js';
import type { MessageService } from '../messages/index.js';
import type { TicketService } from '../tickets/index.js';
import { receiveTicketMail } from '../tickets/inbound.js';
import type { InboundJob } from './inbound.js';
import type { ChannelRow, InboundEventRow, InboundMessage, InboundStatus } from './types.js';
import type { DeliveryUpdates } from './outbound.js';
import type { InboundMediaStore } from './media.js';
import { MESSAGE_CONTENT_MAX } from '../../limits.js';

const SUBJECT_NUMBER = /\[#(\d{1,9})\]/;
/** contacts.name and conversations.visitor_name are varchar(200). */
const SENDER_NAME_MAX = 200;

/** What one statement finds for a sender: the contact of its channel identity, and that contact's open conversation on the channel. */
interface SenderLookup {
  contactId: string | null;
  conversation: Pick<Conversation, 'id' | 'status' | 'contactId'> | null;
}

interface Turn {
  ready: Promise<void>;
  done: () => void;
}

/** A job's claim, marked done with the outcome of its one event. */
interface Claim {
  id: string;
  attempt: number;
}

interface Outcome {
  id: string;
  /** The claim of the event's job when the job holds this event alone, marked done by the same statement. */
  jobId: string | null;
  attempt: number | null;
  status: InboundEventRow['status'];
  error: string | null;
  conversationId: string | null;
  ticketId: string | null;
}

/** Events claimed in one turn read together. */
const EVENT_BATCH = 200;

export class InboundProcessor {
  /**
   * Slow-path events run two at a time: each holds a pooled connection for its transaction (and may want another
   * meanwhile), so more would starve the webhooks waiting on one statement for their 200, or the pool itself.
   */
  private readonly slowLane = new KeyedLimit(2);

  /** The tail of each sender's events being processed: the next one of that sender waits for it. */
  private readonly senders = new Map<string, Promise<void>>();

  private readonly loadEvent = tickBatch(async (ids: string[]) => {
    const events = (await this.deps.knex('inbound_events').whereIn('id', [...new Set(ids)]).orderBy('seq')) as InboundEventRow[];
    const channelIds = [...new Set(events.map((e) => e.channelId))];
    const channels = (await this.deps.knex('channels').whereIn('id', channelIds)) as ChannelRow[];
    const channelById = new Map(channels.map((c) => [c.id, c]));
    // Jobs are claimed in no particular order: each sender's events queue up in the order they were stored.
    const turns = new Map<string, Turn>();
    for (const event of events) {
      if (event.status !== 'pending' || event.payload.kind !== 'message' || !channelById.has(event.channelId)) continue;
      turns.set(event.id, this.takeTurn(`${event.channelId}:${(event.payload as InboundMessage).from}`));
    }
    const byId = new Map(events.map((e) => [e.id, e]));
    return ids.map((id) => {
      const event = byId.get(id);
      return event ? { event, channel: channelById.get(event.channelId) ?? null, turn: turns.get(id) ?? null } : null;
    });
  }, { max: EVENT_BATCH });

  /** A place in the sender's queue: wait for `ready`, then call `done` whatever happened. */
  private takeTurn(key: string): Turn {
    let done!: () => void;
    const tail = new Promise<void>((resolve) => (done = resolve));
    const ready = this.senders.get(key) ?? Promise.resolve();
    this.senders.set(key, tail);
    void tail.then(() => {
      if (this.senders.get(key) === tail) this.senders.delete(key);
    });
    return { ready, done };
  }

  private readonly lookUpSender = tickBatch(async (keys: { orgId: string; channel: ChannelRow; externalId: string }[]) => {
    const input = keys.map((k, ord) => ({ ord, organization_id: k.orgId, channel: k.channel.type, channel_id: k.channel.id, external_id: k.externalId }));
    const result = await this.deps.knex.raw(
      `select i.ord, ci.contact_id as "contactId", conv.id as "conversationId", conv.status
         from jsonb_to_recordset(?::jsonb) as i(ord int, organization_id uuid, channel text, channel_id uuid, external_id text)
         left join contact_identities ci on ci.organization_id = i.organization_id and ci.channel = i.channel and ci.external_id = i.external_id
         left join lateral (
           select c.id, c.status from conversations c
            where c.channel_id = i.channel_id and c.contact_id = ci.contact_id and c.organization_id = i.organization_id
              and c.status in ('open', 'pending', 'resolved')
            order by c.created_at desc limit 1
         ) conv on true`,
      [JSON.stringify(input)],
    );
    const rows = new Map(((result.rows ?? result) as { ord: number; contactId: string | null; conversationId: string | null; status: Conversation['status'] | null }[]).map((r) => [r.ord, r]));
    return keys.map((_, ord): SenderLookup => {
      const r = rows.get(ord);
      return { contactId: r?.contactId ?? null, conversation: r?.conversationId ? { id: r.conversationId, status: r.status!, contactId: r.contactId } : null };
    });
  }, { max: EVENT_BATCH });

  /** Outcomes and their jobs together: an event recorded processed never leaves its job to run again, nor the reverse. */
  private readonly record = tickBatch(async (outcomes: Outcome[]) => {
    await this.deps.knex.raw(
      `with o as (
         select * from jsonb_to_recordset(?::jsonb) as o(id uuid, status text, error text, conversation_id uuid, ticket_id uuid, job_id uuid, attempt int)
       ), done as (
         ${finishJobsSql('(select job_id as id, attempt as attempts from o) as claims')}
       )
       update inbound_events e set status = o.status, error = o.error, conversation_id = o.conversation_id, ticket_id = o.ticket_id, processed_at = now()
         from o where e.id = o.id`,
      [JSON.stringify(outcomes.map((o) => ({ id: o.id, status: o.status, error: o.error, conversation_id: o.conversationId, ticket_id: o.ticketId, job_id: o.jobId, attempt: o.attempt })))],
    );
    return outcomes.map(() => undefined);
  }, { max: EVENT_BATCH });

  constructor(private readonly deps: { knex: Knex; contacts: ContactService; messages: MessageService; tickets: TicketService; deliveries: DeliveryUpdates; media: InboundMediaStore }) {}

  /**
   * Processes the job's events. A job of one event writes its outcome with the job's own (JOB_FINISHED); a job of
   * several ends once each of its events is processed (or failed: it runs again, and the events already processed
   * are skipped).
   */
  async handle(job: Job<InboundJob>): Promise<void | typeof JOB_FINISHED> {
    // Jobs written before events were grouped name their one event by `eventId`.
    const ids = job.payload.eventIds ?? [job.payload.eventId!];
    if (ids.length === 1) return (await this.handleEvent(ids[0]!, { id: job.id, attempt: job.attempt })) ? JOB_FINISHED : undefined;
    const settled = await Promise.allSettled(ids.map((id) => this.handleEvent(id, null)));
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /** Whether the event's outcome was written (with its claim's, when given). */
  private async handleEvent(eventId: string, claim: Claim | null): Promise<boolean> {
    const loaded = await this.loadEvent(eventId);
    if (!loaded) return false;
    const { event, channel, turn } = loaded;
    if (!turn) {
      if (event.status !== 'pending') return false;
      await (channel ? this.process(claim, event, channel) : this.finish(claim, event, 'ignored', { error: 'channel removed' }));
      return true;
    }
    // One sender's messages one after another: the second must see the conversation the first one opened.
    try {
      await turn.ready;
      await this.process(claim, event, channel!);
      return true;
    } finally {
      turn.done();
    }
  }

  private async process(job: Claim | null, event: InboundEventRow, channel: ChannelRow): Promise<void> {
    const mail = event.payload as InboundMessage;
    // The common case: a known sender's text to its open conversation, answering nothing. It takes no transaction
    // and no slow lane: its lookups and its message are batched with the other events'.
    const plain = event.payload.kind === 'message' && !mail.media?.length && !mail.inReplyTo && !mail.references.length && !(channel.type === 'email' && SUBJECT_NUMBER.test(mail.subject ?? ''));
    const known = plain ? await this.lookUpSender({ orgId: channel.organizationId, channel, externalId: mail.from }) : null;
    if (known?.contactId && known.conversation) return this.finish(job, event, 'processed', { conversationId: await this.toConversation(channel, event, mail, known) });
    return this.slowLane.run('slow', () => this.processSlowly(job, event, channel, known));
  }

  /** New senders, files, mail answering a ticket or a conversation, statuses: transactions, a few at a time. */
  private async processSlowly(job: Claim | null, event: InboundEventRow, channel: ChannelRow, known: SenderLookup | null): Promise<void> {
    if (event.payload.kind === 'status') {
      await this.deps.deliveries.providerStatus(channel, event.payload as InboundStatus);
      return this.finish(job, event, 'processed', {});
    }
    const mail = event.payload as InboundMessage;
    if (channel.type === 'email') {
      const ticket = await this.ticketOf(channel.organizationId, mail);
      if (ticket) {
        // Its files are stored and shown on the ticket's reply as on a conversation's message.
        const files = mail.media?.length ? await this.deps.media.store(channel, event.id, mail.media) : null;
        const content = [mail.text, ...(files?.notes ?? [])].filter(Boolean).join('\n\n') || (files?.objectIds.length ? mail.media!.map((m) => m.fileName ?? 'file').join(', ') : mail.text);
        const { ticket: joined } = await receiveTicketMail(this.deps.tickets.core, ticket, { content, from: mail.from, subject: mail.subject, messageId: mail.messageId, contactId: ticket.contactId, attachments: files?.objectIds ?? [] });
        return this.finish(job, event, 'processed', { ticketId: joined.id });
      }
    }
    const conversationId = await this.toConversation(channel, event, mail, known);
    return this.finish(job, event, 'processed', { conversationId });
  }

  /** By In-Reply-To/References of a ticket mail, else by `[#number]` in the subject from the requester's address. */
  private async ticketOf(orgId: string, mail: InboundMessage): Promise<Ticket | null> {
    const ids = [mail.inReplyTo, ...mail.references].filter((x): x is string => !!x);
    const threaded = await this.deps.tickets.core.deps.mail.ticketForMessageIds(orgId, ids);
    if (threaded) return threaded;
    const number = SUBJECT_NUMBER.exec(mail.subject ?? '')?.[1];
    if (!number) return null;
    const ticket = await this.deps.tickets.core.models.Ticket.forOrg(orgId).where({ number: Number(number) }).first();
    if (!ticket || ticket.requesterEmail?.toLowerCase() !== mail.from.toLowerCase()) return null;
    // A merged ticket's mail lands on the ticket it was merged into, by its number as by its thread.
    return this.deps.tickets.core.deps.mail.landingOf(orgId, ticket);
  }

  private async toConversation(channel: ChannelRow, event: InboundEventRow, received: InboundMessage, lookedUp: SenderLookup | null): Promise<string> {
    const { knex } = this.deps;
    // A sender's display name is whatever the provider passed on (a WhatsApp profile, a mail's From): it is cut to
    // what a contact's and a conversation's name hold, or the insert fails and the message is lost after the retries.
    const mail = received.fromName && received.fromName.length > SENDER_NAME_MAX ? { ...received, fromName: received.fromName.slice(0, SENDER_NAME_MAX) } : received;
    const orgId = channel.organizationId;
    // A reply to a mail we sent for a conversation goes back to that conversation.
    const ids = [mail.inReplyTo, ...mail.references].filter((x): x is string => !!x);
    const threaded = ids.length ? ((await knex('channel_deliveries').where({ organizationId: orgId }).whereIn('providerMessageId', ids).orderBy('createdAt', 'desc').first()) as { conversationId: string } | undefined) : undefined;
    const known = lookedUp ?? (await this.lookUpSender({ orgId, channel, externalId: mail.from }));
    const contactId = known.contactId ?? (await this.contactOf(channel, mail));
    let conversation: Pick<Conversation, 'id' | 'status' | 'contactId'> | null | undefined = threaded ? ((await knex('conversations').where({ id: threaded.conversationId, organizationId: orgId }).first()) as Conversation | undefined) : undefined;
    if (!conversation || conversation.status === 'closed' || conversation.contactId !== contactId) {
      // A contact found by its identity comes with its open conversation; one just found or made by email or phone is looked up.
      conversation = known.contactId
        ? known.conversation
        : ((await knex('conversations').where({ organizationId: orgId, channelId: channel.id, contactId }).whereIn('status', ['open', 'pending', 'resolved']).orderBy('createdAt', 'desc').first()) as Conversation | undefined);
    }
    const files = mail.media?.length ? await this.deps.media.store(channel, event.id, mail.media) : null;
    const text = [mail.text, ...(files?.notes ?? [])].filter(Boolean).join('\n\n');
    const content = channel.type === 'email' && mail.subject && !conversation ? `${mail.subject}\n\n${text}` : text;
    const message = {
      // The event id as clientMessageId: a job run twice stores the message once (and opens one conversation).
      content: content.slice(0, MESSAGE_CONTENT_MAX) || (files?.objectIds.length ? mail.media!.map((m) => m.fileName ?? 'file').join(', ') : '(empty)'), clientMessageId: `inbound:${event.id}`,
      ...(files?.objectIds.length ? { attachments: files.objectIds, type: files.images ? ('image' as const) : ('file' as const) } : {}),
      metadata: { channel: channel.type, channelId: channel.id, from: mail.from, ...(mail.subject ? { subject: mail.subject } : {}), ...(mail.messageId ? { providerMessageId: mail.messageId } : {}) },
    };
    const start = {
      channel: channel.type, source: 'channel', subject: mail.subject?.slice(0, 255) ?? null, visitorName: mail.fromName,
      visitorEmail: channel.type === 'email' ? mail.from : null, channelId: channel.id, channelAddress: mail.from,
    };
    // The one send path: a first message opens the conversation in the same transaction, and routing and
    // notifications follow its conversation.created event as for widget chats.
    const sent = await this.deps.messages.send({ type: 'contact', orgId, contactId }, conversation ? { ...message, conversationId: conversation.id } : { ...message, start });
    return sent.conversation.id;
  }

  /** A sender without a contact of this channel identity: found or created by email/phone through the conflict rules. */
  private async contactOf(channel: ChannelRow, mail: InboundMessage): Promise<string> {
    const identity = { channel: channel.type, externalId: mail.from };
    const fields = { name: mail.fromName, ...(channel.type === 'email' ? { email: mail.from } : {}), ...(channel.type === 'whatsapp' ? { phone: `+${mail.from.replace(/^\+/, '')}` } : {}) };
    try {
      return (await this.deps.contacts.conflicts.upsertFromSource(channel.organizationId, 'channel', { ...fields, identity })).contact.id;
    } catch (err) {
      // A phone number that does not parse is no reason to lose the message: the identity alone names the contact.
      if (channel.type !== 'whatsapp') throw err;
      return (await this.deps.contacts.conflicts.upsertFromSource(channel.organizationId, 'channel', { name: mail.fromName, identity })).contact.id;
    }
  }

  private finish(job: Claim | null, event: InboundEventRow, status: InboundEventRow['status'], e: { error?: string; conversationId?: string; ticketId?: string }): Promise<void> {
    return this.record({ id: event.id, jobId: job?.id ?? null, attempt: job?.attempt ?? null, status, error: e.error ?? null, conversationId: e.conversationId ?? null, ticketId: e.ticketId ?? null });
  }
}

