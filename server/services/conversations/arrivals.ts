// What follows a new conversation, whoever opened it (a visitor on the widget, a follow-up to a closed chat, a
// customer on a channel): routing first, then the notifications the organization asked for. It listens to the
// conversation.created domain event, published after the conversation's transaction commits.
import type { Models } from '../../../db/index.js';
import type { Conversation } from '../../../db/models/Conversation.js';
import type { DomainEventBus } from '../../events.js';
import type { Logger } from '../../logger.js';
import type { NotificationService } from '../notifications.js';
import type { RoutingService } from '../routing.js';

export interface ArrivalDeps {
  models: Models;
  events: DomainEventBus;
  routing: RoutingService;
  notifications: NotificationService;
  logger: Logger;
}

/** Assigns (when the organization auto-assigns) and tells the other agents, unless the organization turned that off. */
export async function welcomeConversation(deps: Omit<ArrivalDeps, 'events' | 'logger'>, conversation: Conversation): Promise<void> {
  const routed = await deps.routing.autoAssign(conversation);
  const org = await deps.models.Organization.query().findById(conversation.organizationId);
  if (!org || org.settings.notifyAgentsOnNewConversation === false) return;
  const agents = await deps.models.Membership.forOrg(conversation.organizationId).where('status', 'accepted').whereNotNull('userId').select('userId');
  const recipients = agents.map((a) => a.userId!).filter((id) => id !== routed.assignedTo);
  await deps.notifications.notify(conversation.organizationId, recipients, {
    type: 'new_conversation',
    title: `New conversation${conversation.visitorName ? ` with ${conversation.visitorName}` : ''}`,
    data: { conversationId: conversation.id },
  });
}

/** Subscribes the welcome to conversation.created; returns the unsubscribe. Runs off the publisher's path. */
export function listenForArrivals(deps: ArrivalDeps): () => void {
  return deps.events.on('conversation.created', ({ conversation }) => {
    welcomeConversation(deps, conversation).catch((err) => deps.logger.error({ err, conversationId: conversation.id }, 'routing a new conversation failed'));
  });
}
