// Auth rules that a mutation run showed no test held: each test here fails when its rule is changed.
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp } from './helpers/factories.js';
import { TEST_SECRETS } from './helpers/server.js';
import { expectApiError, expectApiSuccess, resignToken } from './helpers/auth.js';
import { newVisitor } from './helpers/live.js';

const resign = resignToken;

describe('auth: rules held against mutation', () => {
  it('a widget token whose organization or session is not a string is an invalid token, not an ended session', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const visitor = await newVisitor(owner);
    const secret = TEST_SECRETS.WIDGET_JWT_SECRET;
    const validate = (token: string) => visitor.api.post('/widget/auth/validate', undefined, { token });
    expectApiSuccess(await validate(resign(visitor.token, secret, {})), 200);
    // Malformed claims are refused as the token's fault; a well-formed token naming no session is told its session ended.
    for (const change of [{ orgId: 42 }, { sessionId: 42 }, { orgId: 42, sessionId: 42 }]) {
      const res = await validate(resign(visitor.token, secret, change));
      expectApiError(res, 401, 'unauthorized');
      expect(res.body.message, JSON.stringify(change)).to.equal('The token is invalid');
    }
    const res = await validate(resign(visitor.token, secret, { sessionId: '00000000-0000-4000-8000-000000000000' }));
    expectApiError(res, 401, 'unauthorized');
    expect(res.body.message).to.equal('The widget session has ended');
  });

  it('a widget token whose organization or session is a string but not an id names no session: 401, and the batch it shares still answers', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const visitor = await newVisitor(owner);
    const secret = TEST_SECRETS.WIDGET_JWT_SECRET;
    const validate = (token: string) => visitor.api.post('/widget/auth/validate', undefined, { token });
    // Sent together, so they share one lookup: a malformed id must not fail the valid caller's read (or answer 500).
    const [badSession, badOrg, good] = await Promise.all([
      validate(resign(visitor.token, secret, { sessionId: 'not-a-session-id' })),
      validate(resign(visitor.token, secret, { orgId: 'not-an-organization-id' })),
      validate(visitor.token),
    ]);
    for (const res of [badSession, badOrg]) {
      expectApiError(res, 401, 'unauthorized');
      expect(res.body.message).to.equal('The widget session has ended');
    }
    expectApiSuccess(good, 200);
  });

  it('the resolver takes any bearer: an access token is its operator, a token of no known kind 401', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const actors = server.services.actors;
    const operator = await actors.fromToken(owner.accessToken);
    expect(operator).to.include({ kind: 'operator', userId: owner.userId, orgId: owner.orgId });
    expect(await actors.fromToken(owner.accessToken, 'access')).to.include({ kind: 'operator', userId: owner.userId });
    for (const token of ['garbage', owner.refreshToken]) {
      const refused = await actors.fromToken(token).then(() => null, (err: Error & { status?: number }) => err);
      expect(refused, token).to.be.an('error');
      expect(refused!.status).to.equal(401);
      expect(refused!.message).to.equal('The token is invalid or has expired');
    }
  });
});
