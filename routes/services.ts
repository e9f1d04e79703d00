// What the HTTP adapters need from the core: authentication helpers, rate limits and the domain services.
import type { Context } from 'koa';
import type { ActorResolver } from '../server/auth/actor.js';
import type { CallerCache } from '../server/auth/callerCache.js';
import type { Policies } from '../server/policies/index.js';
import type { Config } from '../server/config.js';
import type { Readiness } from '../server/readiness.js';
import { Unauthorized } from '../server/errors.js';
import type { RateLimits } from '../server/ratelimit.js';
import type { AuthService } from '../server/services/auth.js';
import type { MembershipService } from '../server/services/memberships.js';
import type { OrganizationService } from '../server/services/organizations.js';
import type { Mailer } from '../server/mail/index.js';
import type { AgentService } from '../server/services/agents.js';
import type { ContactService } from '../server/services/contacts/index.js';
import type { ConversationService } from '../server/services/conversations/index.js';
import type { MessageService } from '../server/services/messages/index.js';
import type { NotificationService } from '../server/services/notifications.js';
import type { RoutingService } from '../server/services/routing.js';
import type { WidgetService } from '../server/services/widget.js';
import type { AiService } from '../server/services/ai.js';
import type { AnalyticsService } from '../server/services/analytics/index.js';
import type { ObservabilityService } from '../server/services/observability.js';
import type { TemplateService } from '../server/services/templates.js';
import type { TicketService } from '../server/services/tickets/index.js';
import type { MessageAttachments, StorageService } from '../server/storage/index.js';
import type { AssistService, KnowledgeService, UnansweredQuestions } from '../server/services/knowledge/index.js';
import type { ApiKeyService } from '../server/services/apiKeys/index.js';
import type { EmailIdentityService, EmailSendService } from '../server/services/email/index.js';
import type { ChannelService } from '../server/services/channels/index.js';
import type { WebhookService } from '../server/services/webhooks/index.js';

export interface RouteServices {
  config: Config;
  actors: ActorResolver;
  /** Operators by bearer token as `actors` resolves them, access tokens remembered for a moment (REST and handshakes). */
  callers: CallerCache;
  /** Who may do what to each resource: the rules the routes declare, shared with the socket events. */
  policies: Policies;
  rateLimits: RateLimits;
  auth: AuthService;
  organizations: OrganizationService;
  memberships: MembershipService;
  mailer: Mailer;
  conversations: ConversationService;
  messages: MessageService;
  routing: RoutingService;
  widget: WidgetService;
  notifications: NotificationService;
  agents: AgentService;
  templates: TemplateService;
  contacts: ContactService;
  observability: ObservabilityService;
  ai: AiService;
  tickets: TicketService;
  storage: StorageService;
  attachments: MessageAttachments;
  knowledge: KnowledgeService;
  unanswered: UnansweredQuestions;
  assist: AssistService;
  apiKeys: ApiKeyService;
  webhooks: WebhookService;
  analytics: AnalyticsService;
  email: EmailIdentityService;
  emailSend: EmailSendService;
  channels: ChannelService;
  /** The bearer token of a request: the Authorization header (a `?token=` only when ALLOW_QUERY_TOKEN=true). */
  bearerToken(ctx: Context): string | null;
  /** Whether the database (and Redis, when configured) answer, and whether a graceful stop has begun. */
  readiness: Readiness;
}

export function bearerTokenReader(allowQueryToken: boolean) {
  return (ctx: Context): string | null => {
    const header = ctx.get('authorization');
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    if (match) return match[1]!;
    if (header) throw new Unauthorized('The Authorization header must be "Bearer <token>"');
    if (allowQueryToken && typeof ctx.query.token === 'string' && ctx.query.token) return ctx.query.token;
    return null;
  };
}
