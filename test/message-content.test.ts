// What any send may carry, checked by the message service itself for the paths that have no request schema in
// front of them (the AI, channels, the platform): internal notes only from agents and the platform; text of
// 1..MESSAGE_CONTENT_MAX characters, the limit itself included.
import { expect } from 'chai';
import type { Sender } from '../server/services/messages/index.js';
import { MESSAGE_CONTENT_MAX } from '../server/limits.js';
import { expectApiSuccess } from './helpers/auth.js';
import { signUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';

async function tenant() {
  const { server, baseUrl } = sharedServer();
  const owner = await signUp(server, baseUrl);
  const visitor = await newVisitor(owner);
  const { conversationId } = await startConversation(visitor, 'hello');
  return { owner, visitor, conversationId, messages: server.services.messages };
}

const refusal = (p: Promise<unknown>) => p.then(() => null, (e: unknown) => e as { status: number; code: string; message: string; details: unknown });

describe('what a message may carry', () => {
  it('internal notes come from agents and the platform only: the AI, a visitor or a channel contact are refused', async () => {
    const { owner, visitor, conversationId, messages } = await tenant();
    const refused: Sender[] = [{ type: 'ai', orgId: owner.orgId }, { type: 'visitor', orgId: owner.orgId, sessionId: visitor.sessionId }];
    for (const sender of refused) {
      const err = await refusal(messages.send(sender, { conversationId, content: 'a note', private: true }));
      expect(err, sender.type).to.deep.include({ status: 400, code: 'validation_failed', message: 'Only agents write internal notes', details: [{ field: 'private', message: 'is for agents only' }] });
    }
    const contact = { type: 'contact' as const, orgId: owner.orgId, contactId: '00000000-0000-4000-8000-000000000000' };
    expect(await refusal(messages.send(contact, { content: 'a note', private: true, start: { channel: 'email' } }))).to.deep.include({ status: 400, code: 'validation_failed' });

    const agentNote = await messages.send({ type: 'agent', orgId: owner.orgId, userId: owner.userId }, { conversationId, content: 'an agent note', private: true });
    const summary = await messages.send({ type: 'system', orgId: owner.orgId }, { conversationId, content: 'a summary', private: true, type: 'system' });
    expect([agentNote.message.private, summary.message.private]).to.deep.equal([true, true]);
    const stored = expectApiSuccess(await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken }), 200).messages;
    expect(stored.map((m: any) => [m.content, m.private])).to.deep.equal([['hello', false], ['an agent note', true], ['a summary', true]]);
  });

  it(`takes text of exactly ${MESSAGE_CONTENT_MAX} characters and refuses one more, or none`, async () => {
    const { owner, conversationId, messages } = await tenant();
    const ai = { type: 'ai' as const, orgId: owner.orgId };
    const lengthError = { status: 400, code: 'validation_failed', message: `content must be 1..${MESSAGE_CONTENT_MAX} characters`, details: [{ field: 'content', message: 'has the wrong length' }] };
    for (const content of ['', 'x'.repeat(MESSAGE_CONTENT_MAX + 1)]) {
      const err = await refusal(messages.send(ai, { conversationId, content }));
      expect(err && { status: err.status, code: err.code, message: err.message, details: err.details }, `${content.length} characters`).to.deep.equal(lengthError);
    }
    const longest = await messages.send(ai, { conversationId, content: 'y'.repeat(MESSAGE_CONTENT_MAX) });
    expect(longest.message.content).to.have.length(MESSAGE_CONTENT_MAX);
    const single = await messages.send(ai, { conversationId, content: 'z' });
    expect(single.message.seq).to.equal(longest.message.seq + 1);
  });
});
