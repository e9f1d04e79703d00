// Conversation, message and contact shapes. Visitors get a narrower conversation and never a private message.
import type { Contact } from '../../db/models/Contact.js';
import type { Conversation } from '../../db/models/Conversation.js';
import type { Message } from '../../db/models/Message.js';
import { iso } from './time.js';


export function presentContact(c: Contact) {
  return { id: c.id, name: c.name ?? null, email: c.email ?? null, phone: c.phone ?? null, company: c.company ?? null, createdAt: iso(c.createdAt), updatedAt: iso(c.updatedAt) };
}

const latest = (a: Date | string, b: Date | string | null | undefined): Date | string => (b && new Date(b).getTime() > new Date(a).getTime() ? b : a);

export function presentConversation(c: Conversation) {
  return {
    id: c.id,
    organizationId: c.organizationId,
    status: c.status,
    priority: c.priority,
    subject: c.subject ?? null,
    channel: c.channel,
    source: c.source ?? null,
    assignedTo: c.assignedTo ?? null,
    contactId: c.contactId ?? null,
    ...(c.contact !== undefined ? { contact: c.contact ? presentContact(c.contact) : null } : {}),
    visitor: { sessionId: c.visitorSessionId ?? null, name: c.visitorName ?? null, email: c.visitorEmail ?? null },
    tags: c.tags ?? [],
    unreadCount: c.unreadCount,
    lastSeq: c.lastSeq,
    escalatedAt: iso(c.escalatedAt),
    humanJoinedAt: iso(c.humanJoinedAt),
    firstReplyAt: iso(c.firstReplyAt),
    lastMessageAt: iso(c.lastMessageAt),
    resolvedAt: iso(c.resolvedAt),
    createdAt: iso(c.createdAt),
    // A message moves last_message_at but not updated_at (which the send path leaves alone to keep its write cheap).
    updatedAt: iso(latest(c.updatedAt, c.lastMessageAt)),
  };
}

export type ConversationView = ReturnType<typeof presentConversation>;

/** What a visitor may see of their own conversation. */
export function presentVisitorConversation(c: Conversation) {
  return { id: c.id, status: c.status, subject: c.subject ?? null, lastSeq: c.lastSeq, lastMessageAt: iso(c.lastMessageAt), createdAt: iso(c.createdAt) };
}

export function presentMessage(m: Message) {
  return {
    id: m.id,
    conversationId: m.conversationId,
    seq: m.seq,
    senderType: m.senderType,
    senderId: m.senderId ?? null,
    content: m.content,
    type: m.type,
    private: m.private,
    metadata: m.metadata ?? {},
    clientMessageId: m.clientMessageId ?? null,
    attachments: m.attachments ?? [],
    createdAt: iso(m.createdAt),
  };
}

export type MessageView = ReturnType<typeof presentMessage>;
