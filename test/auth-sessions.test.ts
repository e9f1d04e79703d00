// What a session row keeps (the client address cut to its column, why and when it ended) and the words a client is
// told when its refresh token no longer works.
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { Api } from './helpers/http.js';
import { PASSWORD, signUp } from './helpers/factories.js';
import { expectApiError, expectApiSuccess, jwtPayload, login } from './helpers/auth.js';

describe('auth: what a session keeps', () => {
  it('signs in behind a proxy that forwards a long client address (stored cut to 64 characters)', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    // The test server trusts its proxy (TRUST_PROXY): the first X-Forwarded-For entry is the client address.
    const forwarded = `client-${'a'.repeat(90)}`;
    const res = await owner.api.post('/auth/login', { email: owner.email, password: PASSWORD }, { headers: { 'x-forwarded-for': `${forwarded}, 10.0.0.1` } });
    const signedIn = expectApiSuccess(res, 200);
    const session = await server.db.models.AuthSession.query().findById(jwtPayload(signedIn.accessToken).sid);
    expect(session!.ip).to.equal(forwarded.slice(0, 64));
    expectApiSuccess(await owner.api.get('/auth/profile', { token: signedIn.accessToken }), 200);
  });

  it('records why a session ended: a refresh token used twice revokes it as refresh_reuse, and says so', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const api = new Api(baseUrl);
    const { sid } = jwtPayload(owner.accessToken);
    const rotated = expectApiSuccess(await api.post('/auth/refresh-token', { refreshToken: owner.refreshToken }), 200);
    const live = await server.db.models.AuthSession.query().findById(sid);
    expect(live!.lastRefreshedAt).to.be.an.instanceOf(Date);
    expect(live!.revokedAt).to.equal(null);

    const reused = await api.post('/auth/refresh-token', { refreshToken: owner.refreshToken });
    expectApiError(reused, 401, 'unauthorized');
    expect(reused.body.message).to.equal('This refresh token was already used; the session is revoked');
    const revoked = await server.db.models.AuthSession.query().findById(sid);
    expect(revoked!.revokedReason).to.equal('refresh_reuse');
    expect(revoked!.revokedAt).to.be.an.instanceOf(Date);

    // From then on the session is over for the newest token too, in the words that tell the client to sign in.
    const ended = await api.post('/auth/refresh-token', { refreshToken: rotated.refreshToken });
    expectApiError(ended, 401, 'unauthorized');
    expect(ended.body.message).to.equal('The session has ended; sign in again');
  });

  it('records logout and a password change as the reasons, and a password change keeps only its own session', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const api = new Api(baseUrl);
    const second = await login(api, owner.email, PASSWORD);
    const third = await login(api, owner.email, PASSWORD);
    expectApiSuccess(await api.post('/auth/logout', {}, { token: third.accessToken }), 200);
    const res = await api.post('/auth/change-password', { currentPassword: PASSWORD, newPassword: `${PASSWORD}-new` }, { token: owner.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    const reasonOf = async (token: string) => (await server.db.models.AuthSession.query().findById(jwtPayload(token).sid))!.revokedReason;
    expect(await Promise.all([owner.accessToken, second.accessToken, third.accessToken].map(reasonOf))).to.deep.equal([null, 'password_changed', 'logout']);
  });
});
