// Rate limits from settings: RATE_LIMIT_WIDGET_TOKEN changes the visitor-token limit of a running server.
import { expect } from 'chai';
import { RATE_LIMIT_RULES } from '../server/ratelimit.js';
import { signUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { Api, randomIp } from './helpers/http.js';
import { widgetKey } from './helpers/live.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { expectError } from './helpers/tenancy.js';

const tokenFor = (api: Api, publicKey: string) => api.post('/widget/auth/token', { publicKey, visitor: { name: 'Rae Rate' } });

describe('rate limits from settings', () => {
  let test: TestServer | null = null;
  after(async () => {
    await test?.stop();
  });

  it('RATE_LIMIT_WIDGET_TOKEN=ip=3: the 4th visitor token from one IP within the minute is 429', async () => {
    test = await startTestServer({ RATE_LIMIT_WIDGET_TOKEN: 'ip=3' });
    const owner = await signUp(test.server, test.baseUrl);
    const publicKey = await widgetKey(owner);
    const api = new Api(test.baseUrl, randomIp());
    for (let i = 0; i < 3; i++) expect((await tokenFor(api, publicKey)).status).to.equal(201);
    const refused = await tokenFor(api, publicKey);
    expectError(refused, 429, 'rate_limited');
    expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 60);
    expect((await tokenFor(new Api(test.baseUrl, randomIp()), publicKey)).status, 'another IP is not affected').to.equal(201);
  });

  it('without the setting, the default (120 a minute) lets a 4th and 5th through', async () => {
    expect(RATE_LIMIT_RULES['widget-token'].perIp).to.equal(120);
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const publicKey = await widgetKey(owner);
    const api = new Api(baseUrl, randomIp());
    for (let i = 0; i < 5; i++) expect((await tokenFor(api, publicKey)).status).to.equal(201);
  });
});
