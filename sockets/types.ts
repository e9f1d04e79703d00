// The shapes the socket modules share (the socket, its data, the organization namespace, what the realtime layer is
// given): a leaf, so the handlers and the broadcaster never import the module that wires them.
import type { Namespace, Server, Socket } from 'socket.io';
import type { Models } from '../db/index.js';
import type { OperatorActor, VisitorActor } from '../server/auth/actor.js';
import type { CallerCache } from '../server/auth/callerCache.js';
import type { Config } from '../server/config.js';
import type { DomainEventBus } from '../server/events.js';
import type { Logger } from '../server/logger.js';
import type { Presence } from '../server/presence.js';
import type { RedisLink } from '../server/redis.js';
import type { AgentService } from '../server/services/agents.js';
import type { ConversationService } from '../server/services/conversations/index.js';
import type { MessageService } from '../server/services/messages/index.js';
import type { AssistService } from '../server/services/knowledge/index.js';
import type { WidgetService } from '../server/services/widget.js';
import type { Policies } from '../server/policies/index.js';
import type { ClientToServerEvents, ServerToClientEvents } from './events.js';
import type { MembershipCheck } from './membership.js';

export interface SocketData {
  orgId: string;
  operator?: OperatorActor;
  visitor?: VisitorActor;
}

export type AppSocket = Socket<ClientToServerEvents, ServerToClientEvents, Record<string, never>, SocketData>;
export type OrgNamespace = Namespace<ClientToServerEvents, ServerToClientEvents, Record<string, never>, SocketData>;

export interface RealtimeDeps {
  config: Config;
  logger: Logger;
  models: Models;
  redis: RedisLink | null;
  events: DomainEventBus;
  /** The same remembered callers as REST: agents' handshakes resolve through them. */
  callers: CallerCache;
  /** The authorization rules, the same ones the REST routes apply. */
  policies: Policies;
  presence: Presence;
  widget: WidgetService;
  messages: MessageService;
  conversations: ConversationService;
  agents: AgentService;
  membershipCheck: MembershipCheck;
  /** Agent assist (knowledge and templates, and the AI service when configured). */
  assist?: AssistService;
}

export interface Realtime {
  io: Server<ClientToServerEvents, ServerToClientEvents, Record<string, never>, SocketData>;
  /** This instance's connected sockets, in every organization. */
  localSockets(): AppSocket[];
  /** Handshakes waiting for their caller now (sockets/admission.ts refuses newcomers past what it answers soon). */
  handshakesWaiting(): number;
  close(): Promise<void>;
}
