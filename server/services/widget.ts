// The embeddable widget: its configuration, visitor sessions and tokens, visitor conversations and QR codes.
import { randomBytes } from 'node:crypto';
import QRCode from 'qrcode';
import type { Models } from '../../db/index.js';
import type { Conversation } from '../../db/models/Conversation.js';
import type { Message } from '../../db/models/Message.js';
import type { VisitorSession } from '../../db/models/VisitorSession.js';
import type { Widget } from '../../db/models/Widget.js';
import type { VisitorActor } from '../auth/actor.js';
import type { TokenService } from '../auth/tokens.js';
import { Forbidden, NotFound } from '../errors.js';
import type { MessageService } from './messages/index.js';

export type { VisitorActor } from '../auth/actor.js';

export interface WidgetConfigInput {
  displayName?: string;
  appearance?: Record<string, unknown>;
  behavior?: Record<string, unknown>;
  allowedOrigins?: string[];
  ai?: Record<string, unknown>;
  collectUserInfo?: Record<string, unknown>;
}

/** Where a visitor request comes from: the page's Origin, and whether it is one of the server's own pages. */
export interface RequestOrigin {
  origin: string | null;
  /** The server's own hosted chat page (same host), which any widget may use whatever its allowedOrigins. */
  sameHost: boolean;
}

/** A visitor request from a website the widget does not list: answered 403 and without CORS headers. */
export class OriginNotAllowed extends Forbidden {
  constructor() {
    super('This website is not allowed to use the widget');
  }
}

/**
 * Same host as the server: by Origin when the browser sent one, else by Sec-Fetch-Site (browsers send no Origin on
 * a same-origin GET; neither header can be set by a page's script).
 */
export function requestOrigin(headers: { origin?: string; host?: string; secFetchSite?: string }): RequestOrigin {
  const origin = headers.origin || null;
  if (!origin) return { origin: null, sameHost: headers.secFetchSite === 'same-origin' };
  try {
    return { origin, sameHost: !!headers.host && new URL(origin).host === headers.host.toLowerCase() };
  } catch {
    return { origin, sameHost: false };
  }
}

const newPublicKey = () => `pk_${randomBytes(18).toString('base64url')}`;
// Listed origins are a scheme and a host (the route's pattern refuses paths, slashes and spaces), and a browser's
// Origin header is one already serialized: only the case can differ.
const normalizeOrigin = (o: string) => o.toLowerCase();

export class WidgetService {
  constructor(
    private readonly deps: {
      models: Models;
      tokens: TokenService;
      messages: MessageService;
      publicUrl: string;
    },
  ) {}

  private get models() {
    return this.deps.models;
  }

  /** Every organization has one widget, made with defaults the first time an admin looks at it. */
  async forOrg(orgId: string): Promise<Widget> {
    const existing = await this.models.Widget.forOrg(orgId).first();
    if (existing) return existing;
    const org = await this.models.Organization.query().findById(orgId);
    if (!org) throw new NotFound('Organization');
    await this.models.Widget.forOrg(orgId)
      .insert({ organizationId: orgId, publicKey: newPublicKey(), displayName: org.name, appearance: {}, behavior: {}, allowedOrigins: [], ai: {}, collectUserInfo: {} })
      .onConflict('organizationId')
      .ignore();
    return (await this.models.Widget.forOrg(orgId).first())!;
  }

  async update(orgId: string, input: WidgetConfigInput): Promise<Widget> {
    const widget = await this.forOrg(orgId);
    const patch: Partial<Widget> = { ...input };
    if (input.allowedOrigins) patch.allowedOrigins = [...new Set(input.allowedOrigins.map(normalizeOrigin))];
    return this.models.Widget.forOrg(widget.organizationId).patchAndFetchById(widget.id, patch);
  }

  async byPublicKey(publicKey: string): Promise<Widget> {
    // A public key names its widget in whichever organization holds it: this lookup is what finds the organization.
    const widget = await this.models.Widget.acrossOrgs().findOne({ publicKey });
    if (!widget) throw new NotFound('Widget');
    return widget;
  }

  /** An empty list allows every origin; otherwise the page's Origin must be listed or be the server's own. */
  originAllowed(widget: Pick<Widget, 'allowedOrigins'>, from: RequestOrigin): boolean {
    const allowed = widget.allowedOrigins;
    if (allowed.length === 0 || from.sameHost) return true;
    if (!from.origin) return false;
    const origin = normalizeOrigin(from.origin);
    return allowed.includes(origin) || origin === normalizeOrigin(new URL(this.deps.publicUrl).origin);
  }

  /** Every visitor call checks its origin as the token exchange does. */
  assertOrigin(widget: Pick<Widget, 'allowedOrigins'>, from: RequestOrigin): void {
    if (!this.originAllowed(widget, from)) throw new OriginNotAllowed();
  }

  /** Exchanges the public key (and optionally a session to resume) for a 24-hour widget_session token. */
  async issueToken(
    input: { publicKey: string; sessionId?: string; visitor?: { name?: string; email?: string } },
    from: RequestOrigin,
  ): Promise<{ token: string; sessionId: string; organizationId: string; expiresAt: string }> {
    const widget = await this.byPublicKey(input.publicKey);
    this.assertOrigin(widget, from);
    const origin = from.origin;
    let session: VisitorSession | undefined;
    if (input.sessionId) session = await this.models.VisitorSession.forOrg(widget.organizationId).findById(input.sessionId).where('widgetId', widget.id);
    const visitor = { name: input.visitor?.name?.trim() || null, email: input.visitor?.email?.trim().toLowerCase() || null };
    if (session) {
      const patch: Partial<VisitorSession> = { lastSeenAt: new Date() };
      if (visitor.name) patch.name = visitor.name;
      if (visitor.email) patch.email = visitor.email;
      session = await this.models.VisitorSession.forOrg(widget.organizationId).patchAndFetchById(session.id, patch);
    } else {
      session = await this.models.VisitorSession.forOrg(widget.organizationId).insertAndFetch({ organizationId: widget.organizationId, widgetId: widget.id, ...visitor, origin, lastSeenAt: new Date() });
    }
    const signed = this.deps.tokens.signWidget({ orgId: widget.organizationId, widgetId: widget.id, sessionId: session.id });
    return { token: signed.token, sessionId: session.id, organizationId: widget.organizationId, expiresAt: new Date(signed.expiresAt * 1000).toISOString() };
  }

  async visitorConversations(visitor: VisitorActor): Promise<Conversation[]> {
    return this.models.Conversation.forOrg(visitor.orgId).where('visitorSessionId', visitor.sessionId).orderBy('createdAt', 'desc');
  }

  async visitorConversation(visitor: VisitorActor, conversationId: string): Promise<Conversation> {
    const conversation = await this.models.Conversation.forOrg(visitor.orgId).findById(conversationId).where('visitorSessionId', visitor.sessionId);
    if (!conversation) throw new NotFound('Conversation');
    return conversation;
  }

  async visitorMessages(visitor: VisitorActor, conversationId: string, afterSeq: number, limit: number): Promise<Message[]> {
    await this.visitorConversation(visitor, conversationId);
    return this.deps.messages.page(visitor.orgId, conversationId, { afterSeq, limit, publicOnly: true });
  }

  async recordQrScan(publicKey: string, meta: { userAgent: string | null; referrer: string | null }, from: RequestOrigin): Promise<void> {
    const widget = await this.byPublicKey(publicKey);
    this.assertOrigin(widget, from);
    await this.models.QrScan.forOrg(widget.organizationId).insert({ organizationId: widget.organizationId, widgetId: widget.id, userAgent: meta.userAgent?.slice(0, 512) ?? null, referrer: meta.referrer?.slice(0, 2048) ?? null });
  }

  publicLink(widget: Widget): string {
    return `${this.deps.publicUrl}/chat/${encodeURIComponent(widget.publicKey)}?source=qr`;
  }

  async qr(orgId: string, format: 'svg' | 'png'): Promise<{ contentType: string; body: string | Buffer }> {
    const link = this.publicLink(await this.forOrg(orgId));
    if (format === 'png') return { contentType: 'image/png', body: await QRCode.toBuffer(link, { type: 'png', margin: 2, width: 512 }) };
    return { contentType: 'image/svg+xml', body: await QRCode.toString(link, { type: 'svg', margin: 2 }) };
  }
}
