// Makes the generated OpenAPI document good to read and to generate clients from: shared component schemas,
// a description on every parameter and body field, request examples, the raw responses' real shapes, the license.
import type { JsonSchema } from './registry.js';
import { ContactView } from './schemas/contacts.js';
import { ContactView as ContactSummaryView, ConversationView, MessageView, VisitorConversationView } from './schemas/live.js';

type Doc = Record<string, unknown> & { info: Record<string, unknown>; paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, JsonSchema> } };
interface Parameter {
  name: string;
  in: string;
  description?: string;
  schema?: JsonSchema;
}
interface Operation {
  operationId: string;
  parameters?: Parameter[];
  requestBody?: { content: Record<string, { schema: JsonSchema; examples?: unknown }> };
  responses: Record<string, { description: string; content?: Record<string, { schema: JsonSchema }> }>;
}

/** Schemas that route definitions share by reference become named components (one generated type each). */
const COMPONENTS: [string, JsonSchema][] = [
  ['Conversation', ConversationView],
  ['VisitorConversation', VisitorConversationView],
  ['Message', MessageView],
  ['Contact', ContactView],
  ['ContactSummary', ContactSummaryView],
];

/** Descriptions of the names used across the API; other names get one made from the name itself. */
const NAMES: Record<string, string> = {
  orgId: 'Organization id (the caller must be a member)',
  organizationId: 'Organization id',
  conversationId: 'Conversation id',
  contactId: 'Contact id',
  ticketId: 'Ticket id',
  memberId: 'Membership id of the member',
  id: 'Id of the resource',
  token: 'The secret token from the link in the email',
  limit: 'Page size (default 50, at most 200 unless stated)',
  offset: 'Number of items to skip',
  q: 'Free-text search',
  status: 'Status to filter by or to set',
  role: 'Role in the organization: owner, admin or agent',
  email: 'Email address (case-insensitive)',
  password: 'Password, 8 to 128 characters',
  newPassword: 'The new password, 8 to 128 characters',
  currentPassword: 'The current password',
  name: 'Display name',
  code: 'The 6-digit code from the email',
  type: 'Kind of item',
  publicKey: "The widget's public key (from GET /widget/manage)",
  sessionId: 'Visitor session to resume (from an earlier token)',
  afterSeq: 'Only messages with a greater seq',
  beforeSeq: 'Only messages with a smaller seq',
  refreshToken: 'The refresh token from sign-in or the last refresh',
  message: 'Message text',
  subject: 'Subject line',
  priority: 'Priority: low, medium, high or urgent',
  tags: 'Tags',
  private: 'An internal note (never shown to the visitor)',
  metadata: 'Free-form data kept with the item',
  domain: "The organization's web domain",
  source: 'Where the visitor started: widget, qr or link',
  format: 'Image format',
  days: 'Number of days back from today',
};

function humanize(name: string): string {
  const words = name.replace(/([a-z0-9])([A-Z])/g, '$1 $2').toLowerCase();
  if (/ id$/.test(words)) return `Id of the ${words.slice(0, -3)}`;
  if (/ ids$/.test(words)) return `Ids of the ${words.slice(0, -4)}s`;
  if (/^(is|has|include|only|allow|assigned|unassigned) /.test(words) || /^(unread|assigned|unassigned)/.test(words)) return `Filter or flag: ${words}`;
  return words.charAt(0).toUpperCase() + words.slice(1);
}
const describe = (name: string) => NAMES[name] ?? humanize(name);

/** A copy of a body schema where every property has a description. */
function describeFields(schema: JsonSchema): JsonSchema {
  if (!schema || typeof schema !== 'object' || '$ref' in schema) return schema;
  const out: JsonSchema = { ...schema };
  if (schema.properties && typeof schema.properties === 'object') {
    const props: Record<string, JsonSchema> = {};
    for (const [key, prop] of Object.entries(schema.properties as Record<string, JsonSchema>)) {
      const described = describeFields(prop);
      props[key] = typeof described.description === 'string' || '$ref' in described ? described : { ...described, description: describe(key) };
    }
    out.properties = props;
  }
  if (schema.items && typeof schema.items === 'object') out.items = describeFields(schema.items as JsonSchema);
  for (const key of ['anyOf', 'oneOf', 'allOf'] as const) if (Array.isArray(schema[key])) out[key] = (schema[key] as JsonSchema[]).map(describeFields);
  return out;
}

/** A copy of any value where each registered schema (by identity) is a $ref, except at its own definition. */
function withRefs(value: unknown, own?: JsonSchema): unknown {
  if (Array.isArray(value)) return value.map((v) => withRefs(v));
  if (!value || typeof value !== 'object') return value;
  if (value !== own) {
    const named = COMPONENTS.find(([, schema]) => schema === value);
    if (named) return { $ref: `#/components/schemas/${named[0]}` };
  }
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withRefs(v)]));
}

/** Examples of the requests most clients make first. */
const EXAMPLES: Record<string, Record<string, unknown>> = {
  initiateSignup: { name: 'Ada Lovelace', email: 'ada@example.org' },
  completeSignup: { email: 'ada@example.org', organizationName: 'Analytical Engines', password: 'correct horse battery', code: '123456' },
  login: { email: 'ada@example.org', password: 'correct horse battery' },
  refreshToken: { refreshToken: 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9...' },
  forgotPassword: { email: 'ada@example.org' },
  resetPasswordWithToken: { token: 'the token from the reset link', newPassword: 'a new long password' },
  inviteMember: { email: 'grace@example.org', role: 'agent', name: 'Grace Hopper' },
  acceptInvite: { token: 'the token from the invitation link', name: 'Grace Hopper', password: 'a long password' },
  replyToConversation: { content: 'Thanks for waiting, your order ships today.', clientMessageId: '6f1c2a4e-9b1d-4c55-8a43-0e4c1d2f9a10' },
  changeConversationStatus: { status: 'resolved' },
  updateWidgetConfig: { displayName: 'Acme Help', appearance: { primaryColor: '#7c3aed' }, behavior: { greeting: 'Hi! How can we help?' }, allowedOrigins: ['https://shop.example.org'] },
  createWidgetToken: { publicKey: 'pk_3vQb9m2kXe7TnL0aR5sWcYpD', visitor: { name: 'Sam Visitor', email: 'sam@example.org' } },
  startWidgetConversation: { content: 'Hello, where is my order?', clientMessageId: '0c9d7a52-51a6-4f7e-9d1e-3c8b2a6f4e11', source: 'widget' },
  sendWidgetMessage: { content: 'It was order 1042.', clientMessageId: 'b7e2c1d0-3f4a-4b5c-8d9e-0f1a2b3c4d5e' },
};

/** Routes answering something other than the JSON envelope: their real content. */
const RAW: Record<string, Record<string, { schema: JsonSchema }>> = {
  openapi: {
    'application/json': {
      schema: {
        type: 'object',
        required: ['openapi', 'info', 'paths', 'components'],
        properties: {
          openapi: { type: 'string', description: 'OpenAPI version (3.1.x)' },
          info: { type: 'object', description: 'Title, version, license and description of the API' },
          servers: { type: 'array', items: { type: 'object' }, description: 'The base URL (PUBLIC_URL)' },
          paths: { type: 'object', description: 'Every operation, by path and method' },
          components: { type: 'object', description: 'Security schemes and shared schemas' },
        },
      },
    },
  },
  getWidgetQr: {
    'image/svg+xml': { schema: { type: 'string', description: 'SVG document' } },
    'image/png': { schema: { type: 'string', contentMediaType: 'image/png', description: '512x512 PNG image' } },
  },
};

export function polishOpenApi<T extends object>(built: T): T {
  const doc = withRefs(built) as Doc;
  for (const [name, schema] of COMPONENTS) doc.components.schemas[name] = withRefs(schema, schema) as JsonSchema;
  doc.info.license = { name: 'MIT', identifier: 'MIT' };
  for (const item of Object.values(doc.paths)) {
    for (const op of Object.values(item)) {
      for (const p of op.parameters ?? []) p.description ??= describe(p.name);
      const json = op.requestBody?.content['application/json'];
      if (json) {
        json.schema = describeFields(json.schema);
        const example = EXAMPLES[op.operationId];
        if (example) json.examples = { default: { summary: 'Example', value: example } };
      }
      const raw = RAW[op.operationId];
      const success = Object.entries(op.responses).find(([status]) => status.startsWith('2'));
      if (raw && success) success[1].content = raw;
    }
  }
  return doc as unknown as T;
}
