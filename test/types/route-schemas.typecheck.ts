// Compiled by `npm run typecheck`, never run: each `@ts-expect-error` fails the typecheck if the line it marks
// starts compiling, so a handler reading what its schema does not admit is a build error, not a 500 in production.
import type { Socket } from 'socket.io';
import { defineRoute, type AnyRoute } from '../../routes/registry.js';
import { object, pageSize, params } from '../../routes/schemas/common.js';
import type { Logger } from '../../server/logger.js';
import { on } from '../../sockets/ack.js';
import * as socketSchemas from '../../sockets/schemas.js';

export function routeInputsFollowTheirSchemas(): AnyRoute {
  return defineRoute({
    method: 'post', path: '/things/:thingId', operationId: 'typeCheckOnly', tag: 'Checks', summary: 'Never mounted',
    auth: { kind: 'org', role: 'agent', orgFrom: 'token' },
    params: params('thingId'),
    query: object({ limit: pageSize(), q: { type: 'string' } }),
    body: object({ title: { type: 'string' }, kind: { type: 'string', enum: ['call', 'visit'] }, count: { type: 'integer' }, note: { type: ['string', 'null'] } }, ['title', 'kind']),
    response: { status: 200, description: 'Never sent' },
    handler: async ({ body, query, params }) => {
      const title: string = body.title;
      const kind: 'call' | 'visit' = body.kind;
      // @ts-expect-error the enum admits only call and visit
      const otherKind: typeof body.kind = 'meeting';
      // @ts-expect-error a field outside `required` may be absent
      const count: number = body.count;
      // @ts-expect-error an integer field is a number, never a string
      const countText: string | undefined = body.count;
      // @ts-expect-error a nullable field may be null
      const note: string | undefined = body.note;
      // @ts-expect-error the body schema declares no `owner`
      const owner: unknown = body.owner;
      // A defaulted query field is always there once validated; an optional one may not be.
      const limit: number = query.limit;
      // @ts-expect-error q is optional
      const q: string = query.q;
      // @ts-expect-error the query schema declares no `offset`
      const offset: unknown = query.offset;
      const id: string = params.thingId;
      // @ts-expect-error the path declares no `otherId`
      const otherId: unknown = params.otherId;
      return { message: [title, kind, otherKind, count, countText, note, owner, limit, q, offset, id, otherId].join(' ') };
    },
  });
}

export function socketPayloadsFollowTheirSchemas(socket: Socket, logger: Logger): void {
  on(socket, logger, 'send_message', socketSchemas.agentSendMessage, async (p) => {
    const content: string = p.content;
    const note: boolean | undefined = p.private;
    // @ts-expect-error the payload schema declares no `metadata`
    const metadata: unknown = p.metadata;
    return { content, note, metadata };
  });
  on(socket, logger, 'send_message', socketSchemas.visitorSendMessage, async (p) => {
    // @ts-expect-error visitors never write internal notes: their schema has no `private`
    const note: unknown = p.private;
    return { note };
  });
  on(socket, logger, 'sync', socketSchemas.sync, async (p) => {
    const afterSeq: number = p.afterSeq;
    // @ts-expect-error afterSeq is an integer
    const afterText: string = p.afterSeq;
    return { afterSeq, afterText };
  });
}
