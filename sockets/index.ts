// Socket.IO on the REST server's port: one namespace per organization, handshake auth, Redis fan-out when configured.
import type { Server as HttpServer } from 'node:http';
import { Server } from 'socket.io';
import { credentialKind, type CredentialKind, type OperatorActor, type VisitorActor } from '../server/auth/actor.js';
import { AppError } from '../server/errors.js';
import { requestIdFrom } from '../routes/middleware/requestId.js';
import { requestOrigin } from '../server/services/widget.js';
import { authorize } from '../server/policies/index.js';
import { redisAdapter } from './adapter.js';
import { HandshakeAdmission } from './admission.js';
import { createBroadcaster } from './broadcast.js';
import type { ClientToServerEvents, ServerToClientEvents } from './events.js';
import { attachOperator } from './operator.js';
import { NAMESPACE, rooms } from './rooms.js';
import { attachVisitor } from './visitor.js';
import type { AppSocket, Realtime, RealtimeDeps, SocketData } from './types.js';

export type { AppSocket, OrgNamespace, Realtime, RealtimeDeps, SocketData } from './types.js';

/** Node's timers fire at once past this delay (about 24.8 days), so longer waits are made of several. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Runs `fn` at the epoch time `when` (milliseconds), however far away; `cancel` stops it. */
function runAt(when: number, fn: () => void): { cancel(): void } {
  let timer: NodeJS.Timeout;
  const arm = () => {
    const left = when - Date.now();
    timer = left > MAX_TIMER_MS ? setTimeout(arm, MAX_TIMER_MS) : setTimeout(fn, Math.max(0, left));
  };
  arm();
  return { cancel: () => clearTimeout(timer) };
}

/** How the log names each kind of caller. */
const KIND_LABEL: Record<CredentialKind, string> = { api_key: 'bot', access: 'agent', widget_session: 'visitor', unknown: 'unknown' };

/** A handshake refusal: the client's connect_error carries `message` unauthorized or forbidden. */
type RefusalCode = 'unauthorized' | 'forbidden' | 'rate_limited';

function refusal(code: RefusalCode, retryAfterSeconds?: number): Error {
  const err = new Error(code) as Error & { data?: unknown };
  err.data = retryAfterSeconds === undefined ? { code } : { code, retryAfter: retryAfterSeconds };
  return err;
}

/**
 * The instance has more handshakes waiting than it answers in a moment: `service_unavailable`, the contract's error
 * body as `data` (with `code` beside it, as other refusals have) and `retryAfter` in seconds, with a fraction: when
 * to try again, already spread at random, so the clients refused together do not come back together.
 */
function busy(requestId: string, retryAfterMs: number): Error {
  const code = 'service_unavailable';
  const message = 'The server is answering many connections; connect again after retryAfter seconds';
  const err = new Error(code) as Error & { data?: unknown };
  err.data = { success: false, message, error: { code, details: [] }, requestId, code, retryAfter: retryAfterMs / 1000 };
  return err;
}

export function createRealtime(http: HttpServer, deps: RealtimeDeps): Realtime {
  const { config, logger } = deps;
  const io = new Server<ClientToServerEvents, ServerToClientEvents, Record<string, never>, SocketData>(http, {
    path: '/socket.io',
    cleanupEmptyChildNamespaces: true,
    // A message is at most 50,000 characters; anything much larger is not a legitimate event.
    maxHttpBufferSize: 256 * 1024,
    // Origins are checked per kind of caller in the handshake below (agents: CORS_ORIGINS; visitors: the widget's list).
    cors: { origin: true, credentials: false },
    serveClient: false,
  });

  if (deps.redis) io.adapter(redisAdapter(deps.redis, config.redisAdapter, logger));

  // Namespaces are made on demand, and only for organizations that exist.
  const orgs = io.of(async (name, _auth, next) => {
    const match = NAMESPACE.exec(name);
    if (!match) return next(null, false);
    try {
      next(null, !!(await deps.models.Organization.query().findById(match[1]!).select('id')));
    } catch (err) {
      next(err as Error, false);
    }
  });

  const admission = new HandshakeAdmission(config.socketAdmission);
  const corsOrigins = new Set(config.corsOrigins);
  const operatorOriginAllowed = (origin: string | undefined) => !origin || corsOrigins.size === 0 || corsOrigins.has('*') || corsOrigins.has(origin);

  orgs.use(async (socket, next) => {
    const orgId = NAMESPACE.exec(socket.nsp.name)![1]!;
    // One id per connection, as REST requests have: the client's X-Request-Id when well-formed, else a new one.
    const requestId = requestIdFrom(socket.handshake.headers['x-request-id']);
    const token = (socket.handshake.auth as { token?: unknown } | undefined)?.token;
    const credential = typeof token === 'string' && token.length > 0 ? credentialKind(token) : 'unknown';
    const kind = KIND_LABEL[credential];
    const refuse = (code: RefusalCode, reason: string, retryAfterSeconds?: number) => {
      logger.debug({ requestId, orgId, kind, reason }, 'socket refused');
      next(refusal(code, retryAfterSeconds));
    };
    if (typeof token !== 'string' || token.length === 0) return refuse('unauthorized', 'no token');
    if (credential === 'unknown') return refuse('unauthorized', 'not an access or widget_session token');
    const origin = socket.handshake.headers.origin;
    // Refused before any work of its own: the client comes back later instead of waiting past its timeout.
    const retryAfterMs = admission.enter();
    if (retryAfterMs !== null) {
      logger.debug({ requestId, orgId, kind, reason: 'too many handshakes waiting', waiting: admission.inProgress, retryAfterMs }, 'socket refused');
      return next(busy(requestId, retryAfterMs));
    }
    try {
      // The same resolver as REST; an agent socket is for reading the organization's conversations, so it needs
      // what a REST read of them needs (a key: conversations:read; a person: an accepted membership).
      // A person's token seen moments ago is answered from memory (server/auth/callerCache.ts: what drops it).
      let actor: OperatorActor | VisitorActor;
      try {
        actor = await deps.callers.fromToken(token, credential);
      } finally {
        admission.leave();
      }
      if (actor.kind === 'operator') {
        if (actor.orgId !== orgId) return refuse('forbidden', `the ${actor.apiKey ? 'key' : 'token'} is for another organization`);
        authorize(actor, deps.policies.conversation.read, actor.membership);
        if (!actor.apiKey && !operatorOriginAllowed(origin)) return refuse('forbidden', 'origin not in CORS_ORIGINS');
        socket.data = { orgId, operator: actor };
        logger.debug({ requestId, orgId, kind, ...(actor.apiKey ? { apiKeyId: actor.apiKey.id } : { userId: actor.userId }), socketId: socket.id }, 'socket connected');
        return next();
      }
      if (actor.orgId !== orgId) return refuse('forbidden', 'the token is for another organization');
      const secFetchSite = socket.handshake.headers['sec-fetch-site'];
      const from = requestOrigin({ origin, host: socket.handshake.headers.host, secFetchSite: typeof secFetchSite === 'string' ? secFetchSite : undefined });
      if (!deps.widget.originAllowed(actor, from)) return refuse('forbidden', "origin not in the widget's allowedOrigins");
      socket.data = { orgId, visitor: actor };
      logger.debug({ requestId, orgId, kind, sessionId: actor.sessionId, socketId: socket.id }, 'socket connected');
      return next();
    } catch (err) {
      if (err instanceof AppError && err.status === 401) return refuse('unauthorized', err.message);
      if (err instanceof AppError && err.status === 403) return refuse('forbidden', err.message);
      // A key over its rate limit: the client's to wait out, as REST's 429 says (not a bad credential, not an error).
      if (err instanceof AppError && err.status === 429) return refuse('rate_limited', err.message, Number(err.headers['Retry-After']) || 1);
      logger.error({ err, requestId }, 'socket handshake failed');
      return refuse('unauthorized', 'handshake failed');
    }
  });

  orgs.on('connection', (socket: AppSocket) => {
    const expiresAt = (socket.data.operator?.tokenExpiresAt ?? socket.data.visitor?.tokenExpiresAt ?? 0) * 1000;
    // The socket lives as long as its token: then session_expired, then disconnect.
    const expiry = runAt(expiresAt, () => {
      socket.emit('session_expired', {});
      socket.disconnect(true);
    });
    socket.on('disconnect', () => expiry.cancel());
    if (socket.data.operator) attachOperator(socket, deps);
    else if (socket.data.visitor) attachVisitor(socket, deps);
  });

  const broadcaster = createBroadcaster(io, orgs, deps);
  // Socket.IO keeps the children of a dynamic namespace private and has no public lookup of namespaces; `_nsps` is
  // the server's registry of them, declared in its typings. Organization namespaces are the ones NAMESPACE names.
  const orgNamespaces = () => [...io._nsps.values()].filter((nsp) => NAMESPACE.test(nsp.name));
  const localSockets = (): AppSocket[] => orgNamespaces().flatMap((nsp) => [...nsp.sockets.values()]);
  // Revocations, suspensions and removals made elsewhere while Redis was away never reached this instance: check
  // this instance's agent sockets against the database once the link is back.
  const recheck = () =>
    void recheckOperators(localSockets(), deps).catch((err) => logger.error({ err }, 'could not re-check agent sockets after the Redis outage'));
  deps.redis?.on('up', recheck);

  return {
    io,
    localSockets,
    handshakesWaiting: () => admission.inProgress,
    async close() {
      broadcaster.stop();
      deps.redis?.off('up', recheck);
      // Tell every client to go now, then stop the engine; Redis clients close last.
      io.disconnectSockets(true);
      for (const nsp of orgNamespaces()) nsp.disconnectSockets(true);
      await new Promise<void>((resolve) => io.close(() => resolve()));
    },
  };
}

/** Disconnects agent sockets whose session ended or whose membership is no longer accepted. */
async function recheckOperators(sockets: AppSocket[], deps: RealtimeDeps): Promise<void> {
  // This instance's sockets span organizations; each row is matched back to its socket by its own organization.
  // Key sockets (bots) have no session or membership row: their key is re-checked instead.
  const bots = sockets.filter((s) => s.data.operator?.apiKey);
  if (bots.length > 0) {
    const keyIds = [...new Set(bots.map((s) => s.data.operator!.apiKey!.id))];
    const live = new Set((await deps.models.ApiKey.acrossOrgs().select('id').whereIn('id', keyIds).whereNull('revokedAt')).map((k) => k.id));
    for (const socket of bots) if (!live.has(socket.data.operator!.apiKey!.id)) socket.disconnect(true);
  }
  const operators = sockets.filter((s) => s.data.operator && !s.data.operator.apiKey);
  if (operators.length === 0) return;
  const sessionIds = [...new Set(operators.map((s) => s.data.operator!.sessionId))];
  const pairs = [...new Set(operators.map((s) => `${s.data.orgId}:${s.data.operator!.userId}`))].map((p) => p.split(':') as [string, string]);
  const [ended, members] = await Promise.all([
    deps.models.AuthSession.query().select('id').whereIn('id', sessionIds).where((q) => q.whereNotNull('revokedAt').orWhere('expiresAt', '<=', new Date())),
    deps.models.Membership.acrossOrgs().select('organizationId', 'userId').whereIn(['organizationId', 'userId'], pairs).where('status', 'accepted'),
  ]);
  const endedSessions = new Set(ended.map((s) => s.id));
  const active = new Set(members.map((m) => `${m.organizationId}:${m.userId}`));
  for (const socket of operators) {
    const actor = socket.data.operator!;
    if (endedSessions.has(actor.sessionId) || !active.has(`${socket.data.orgId}:${actor.userId}`)) socket.disconnect(true);
  }
}

export { rooms };
