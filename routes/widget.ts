// /widget: configuration for admins, the public config, visitor tokens and the visitor's own conversations.
import { presentMessage, presentVisitorConversation } from '../server/presenters/conversation.js';
import { presentPublicWidget, presentWidget } from '../server/presenters/widget.js';
import { assertVisitorMessage } from '../server/policies/index.js';
import { originOf } from './middleware/visitorCors.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { aliasOf, unalias } from './schemas/aliases.js';
import { email, freeForm, object, pageSize, params, personName } from './schemas/common.js';
import { attachmentIds, clientMessageId, content, MessageView, VisitorConversationView, WidgetView } from './schemas/live.js';

const tag = 'Widget';
const publicKey = { type: 'string', minLength: 3, maxLength: 64 } as const;
const settingsObject = freeForm();
/** The AI settings may carry a long system prompt. */
const aiSettings = freeForm({ maxBytes: 65_536 });
const origin = { type: 'string', pattern: '^https?://[^/\\s]+$', maxLength: 300 } as const;
const source = { type: 'string', enum: ['widget', 'qr', 'link'] } as const;

export function widgetRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'get', path: '/widget/manage', operationId: 'getWidgetConfig', tag, auth: { kind: 'org', role: 'admin', orgFrom: 'token' },
      summary: "The organization's widget configuration, with its publicKey (made with defaults on first use)",
      response: { status: 200, description: 'Widget', data: WidgetView },
      handler: async ({ orgId }) => ({ message: 'Widget', data: presentWidget(await s.widget.forOrg(orgId)) }),
    }),
    defineRoute({
      method: 'put', path: '/widget/manage', operationId: 'updateWidgetConfig', tag, auth: { kind: 'org', role: 'admin', orgFrom: 'token' },
      summary: 'Change the widget configuration (fields given replace the stored ones)',
      description: '`allowedOrigins` empty allows every website; otherwise token exchange and visitor sockets must come from a listed origin.',
      body: object({
        displayName: personName,
        appearance: settingsObject,
        behavior: settingsObject,
        allowedOrigins: { type: 'array', items: origin, maxItems: 50 },
        ai: aiSettings,
        collectUserInfo: settingsObject,
      }),
      response: { status: 200, description: 'Widget', data: WidgetView },
      handler: async ({ orgId, body }) => ({ message: 'Widget updated', data: presentWidget(await s.widget.update(orgId, body)) }),
    }),
    defineRoute({
      method: 'get', path: '/widget/config', operationId: 'getPublicWidgetConfig', tag, auth: { kind: 'public' },
      summary: 'The public part of a widget configuration, by public key',
      query: object({ publicKey }, ['publicKey']),
      response: { status: 200, description: 'Public configuration', data: { type: 'object' } },
      errors: [404],
      handler: async ({ query, ctx }) => {
        const widget = await s.widget.byPublicKey(query.publicKey);
        s.widget.assertOrigin(widget, originOf(ctx));
        return { message: 'Widget configuration', data: presentPublicWidget(widget) };
      },
    }),
    defineRoute({
      method: 'post', path: '/widget/auth/token', operationId: 'createWidgetToken', tag, auth: { kind: 'public' }, rateLimit: 'widget-token',
      summary: 'Exchange the public key for a 24-hour widget_session token (resume a visitor with `sessionId`)',
      description:
        'When the widget lists allowedOrigins, the Origin header must be one of them (403 otherwise); the same check applies to every visitor route. ' +
        'CORS on visitor routes follows the widget, not CORS_ORIGINS: a preflight (OPTIONS) is answered for any origin, because it cannot name its widget ' +
        '(the public key is in this body, other routes carry it in the bearer token) and no credentials are ever allowed; the actual request from an origin ' +
        'the widget does not list is answered 403 without CORS headers, so the page reads nothing.',
      body: object({ publicKey, sessionId: { type: 'string', format: 'uuid' }, visitor: object({ name: personName, email }) }, ['publicKey']),
      response: {
        status: 201, description: 'Token',
        data: object({ token: { type: 'string' }, sessionId: { type: 'string', format: 'uuid' }, organizationId: { type: 'string', format: 'uuid' }, expiresAt: { type: 'string', format: 'date-time' } }),
      },
      errors: [403, 404],
      handler: async ({ body, ctx }) => ({ message: 'Widget session started', data: await s.widget.issueToken(body, originOf(ctx)) }),
    }),
    defineRoute({
      method: 'post', path: '/widget/auth/validate', operationId: 'validateWidgetToken', tag, auth: { kind: 'widget' },
      summary: 'Check a widget_session token',
      response: { status: 200, description: 'Valid', data: object({ valid: { const: true }, sessionId: { type: 'string' }, organizationId: { type: 'string' } }) },
      handler: async ({ visitor }) => ({ message: 'Valid', data: { valid: true, sessionId: visitor.sessionId, organizationId: visitor.orgId } }),
    }),
    defineRoute({
      method: 'post', path: '/widget/conversations', operationId: 'startWidgetConversation', tag, auth: { kind: 'widget' },
      summary: 'Start a conversation with a first message',
      description: '`content` is required (`message`, its old name here, is still accepted). A repeated `clientMessageId` answers 200 with the conversation it already started and announces nothing again.',
      body: object({ content, message: aliasOf('content', content), source, clientMessageId }),
      response: { status: 201, description: 'The conversation and its first message', data: object({ conversation: VisitorConversationView, message: MessageView }), also: { status: 200, description: 'A repeated `clientMessageId`: the conversation started the first time' } },
      handler: async ({ visitor, body }) => {
        const text = unalias<string>(body, 'content', 'message', { required: true })!;
        const { conversation, message, duplicate } = await s.messages.send(
          { type: 'visitor', orgId: visitor.orgId, sessionId: visitor.sessionId },
          { content: text, clientMessageId: body.clientMessageId, start: { source: body.source, visitorName: visitor.name, visitorEmail: visitor.email } },
        );
        return { status: duplicate ? 200 : 201, message: duplicate ? 'Already started' : 'Conversation started', data: { conversation: presentVisitorConversation(conversation), message: presentMessage(message) } };
      },
    }),
    defineRoute({
      method: 'get', path: '/widget/conversations', operationId: 'listWidgetConversations', tag, auth: { kind: 'widget' },
      summary: "The visitor's own conversations, newest first",
      response: { status: 200, description: 'Conversations', data: { type: 'array', items: VisitorConversationView } },
      handler: async ({ visitor }) => ({ message: 'Conversations', data: (await s.widget.visitorConversations(visitor)).map(presentVisitorConversation) }),
    }),
    defineRoute({
      method: 'get', path: '/widget/conversations/:conversationId/messages', operationId: 'listWidgetMessages', tag, auth: { kind: 'widget' },
      summary: 'Public messages of one of the visitor\'s conversations (never internal notes)',
      params: params('conversationId'),
      query: object({ afterSeq: { type: 'integer', minimum: 0, default: 0 }, limit: pageSize(100) }),
      response: { status: 200, description: 'Messages', data: { type: 'array', items: MessageView } },
      handler: async ({ visitor, params, query }) => ({ message: 'Messages', data: (await s.widget.visitorMessages(visitor, params.conversationId, query.afterSeq, query.limit)).map(presentMessage) }),
    }),
    defineRoute({
      method: 'post', path: '/widget/conversations/:conversationId/messages', operationId: 'sendWidgetMessage', tag, auth: { kind: 'widget' },
      summary: 'Write in one of the visitor\'s conversations (a resolved one reopens; a closed one starts a new conversation)',
      description:
        'Visitors send text: `type` other than `text` is 400 unless the message has `attachments` (an image or a file is uploaded, never a link in `content`). ' +
        'A repeated `clientMessageId` answers 200 with the first message; one already used by another sender in this conversation answers 409.',
      params: params('conversationId'),
      body: object({ content, type: { type: 'string', enum: ['text', 'image', 'file'] }, clientMessageId, attachments: attachmentIds }, ['content']),
      response: { status: 201, description: 'Stored and announced', data: MessageView, also: { status: 200, description: 'A repeated `clientMessageId`: the message stored the first time, not announced again' } },
      errors: [409],
      handler: async ({ visitor, params, body }) => {
        assertVisitorMessage(body, 'body');
        const { message, duplicate } = await s.messages.send({ type: 'visitor', orgId: visitor.orgId, sessionId: visitor.sessionId }, { ...body, conversationId: params.conversationId });
        return { status: duplicate ? 200 : 201, message: duplicate ? 'Already stored' : 'Message sent', data: presentMessage(message) };
      },
    }),
    defineRoute({
      method: 'post', path: '/widget/qr-scan', operationId: 'recordQrScan', tag, auth: { kind: 'public' }, rateLimit: 'qr-scan',
      summary: "Record a scan of the widget's QR code",
      body: object({ publicKey }, ['publicKey']),
      response: { status: 201, description: 'Recorded' },
      errors: [404],
      handler: async ({ body, ctx }) => {
        await s.widget.recordQrScan(body.publicKey, { userAgent: ctx.get('user-agent') || null, referrer: ctx.get('referer') || null }, originOf(ctx));
        return { message: 'Scan recorded' };
      },
    }),
    defineRoute({
      method: 'get', path: '/widget/qr', operationId: 'getWidgetQr', tag, auth: { kind: 'org', role: 'admin', orgFrom: 'token' },
      summary: "The QR code of the widget's public chat link (image/svg+xml or image/png)",
      query: object({ format: { type: 'string', enum: ['svg', 'png'], default: 'svg' } }),
      response: { status: 200, description: 'The image itself (not wrapped in the success envelope)' },
      handler: async ({ orgId, query }) => {
        const image = await s.widget.qr(orgId, query.format);
        return { message: 'QR code', raw: { contentType: image.contentType, body: image.body } };
      },
    }),
  ];
}
