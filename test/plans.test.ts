// Plans as configuration: DEFAULT_PLAN, PLANS_FILE on a running server, and `npm run org -- plan` changing a plan.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { loadConfig } from '../server/config.js';
import { createServer, type AppServer } from '../server/server.js';
import { signUp, uniqueEmail } from './helpers/factories.js';
import { Api } from './helpers/http.js';
import { runScript } from './helpers/process.js';
import { startTestServer, TEST_SECRETS, type TestServer } from './helpers/server.js';
import { expectError, invite } from './helpers/tenancy.js';

const members = (orgId: string) => `/memberships/organizations/${orgId}/members`;

describe('plans', () => {
  describe('DEFAULT_PLAN and PLANS_FILE', () => {
    let dir: string;
    let test: TestServer | null = null;
    before(() => {
      dir = mkdtempSync(path.join(tmpdir(), 'support-plans-'));
    });
    after(async () => {
      await test?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('new organizations get DEFAULT_PLAN, with the limits PLANS_FILE gives it', async () => {
      const file = path.join(dir, 'plans.json');
      writeFileSync(file, JSON.stringify({ free: { limits: { humanAgents: 2 } }, team: { limits: { humanAgents: 40 }, features: ['live_chat'] } }));
      test = await startTestServer({ PLANS_FILE: file, DEFAULT_PLAN: 'free' });
      const owner = await signUp(test.server, test.baseUrl);
      const entitlements = await owner.api.get('/organizations/billing/entitlements', { token: owner.accessToken });
      expect(entitlements.body.data.plan).to.equal('free');
      expect(entitlements.body.data.limits).to.include({ humanAgents: 2, widgets: 1, aiCallsPerMonth: 1000 });

      await invite(test.server, owner, 'agent'); // seat 2 of 2
      const third = await owner.api.post(`${members(owner.orgId)}/invite`, { email: uniqueEmail('third'), role: 'agent' }, { token: owner.accessToken });
      expectError(third, 403, 'plan_limit_reached');

      // A plan only the file defines is one an organization can be moved to.
      await test.server.services.organizations.changePlan(owner.orgId, 'team');
      const team = await owner.api.get('/organizations/billing/entitlements', { token: owner.accessToken });
      expect(team.body.data).to.deep.include({ plan: 'team', features: ['live_chat'] });
      expect(team.body.data.limits.humanAgents).to.equal(40);
      expect((await owner.api.post(`${members(owner.orgId)}/invite`, { email: uniqueEmail('third'), role: 'agent' }, { token: owner.accessToken })).status).to.equal(201);
    });
  });

  describe('npm run org -- plan', () => {
    let dataDir: string;
    let server: AppServer | null = null;
    const env = () => ({ NODE_ENV: 'test', DATA_DIR: dataDir, DATABASE_URL: process.env.DATABASE_URL, ...TEST_SECRETS });
    const start = async () => {
      server = createServer(loadConfig({ ...env(), PORT: '0', HOST: '127.0.0.1', BCRYPT_COST: '4', LOG_LEVEL: 'silent', TRUST_PROXY: 'true' }));
      return `http://127.0.0.1:${await server.start()}`;
    };
    const stop = async () => {
      await server?.stop();
      server = null;
    };
    const org = (...args: string[]) => runScript('server/org.ts', args, { env: env() });

    before(() => {
      dataDir = mkdtempSync(path.join(tmpdir(), 'support-org-cli-'));
    });
    after(async () => {
      await stop();
      rmSync(dataDir, { recursive: true, force: true });
    });

    it("changes an organization's plan by id or by its owner's email, says what it changed, and entitlements follow", async function () {
      this.timeout(120_000);
      const baseUrl = await start();
      const owner = await signUp(server!, baseUrl, { organizationName: 'Cli First' });
      const second = await owner.api.post('/organizations', { name: 'Cli Second' }, { token: owner.accessToken });
      expect(second.status).to.equal(201);
      const secondId: string = second.body.data.id;
      // The embedded database is opened by one process at a time: the operator stops the server first.
      if (!process.env.DATABASE_URL) {
        const locked = await org('plan', owner.orgId, 'pro');
        expect(locked.code).to.equal(1);
        expect(locked.stderr).to.include('server.lock');
      }
      await stop();

      const byEmail = await org('plan', owner.email.toUpperCase(), 'pro');
      expect(byEmail.code, byEmail.stderr).to.equal(0);
      expect(byEmail.stdout).to.include(`Cli First (${owner.orgId}): plan unlimited -> pro`);
      expect(byEmail.stdout).to.include(`Cli Second (${secondId}): plan unlimited -> pro`);

      const byId = await org('plan', owner.orgId, 'free');
      expect(byId.code, byId.stderr).to.equal(0);
      expect(byId.stdout.trim()).to.equal(`Cli First (${owner.orgId}): plan pro -> free`);
      const again = await org('plan', owner.orgId, 'free');
      expect(again.stdout).to.include('already on plan free');

      const api = new Api(await start());
      const entitlements = await api.get('/organizations/billing/entitlements', { token: owner.accessToken });
      expect(entitlements.status).to.equal(200);
      expect(entitlements.body.data.plan).to.equal('free');
      expect(entitlements.body.data.limits.humanAgents).to.equal(3);
      const list = await api.get('/organizations', { token: owner.accessToken });
      expect(list.body.data.find((o: { id: string }) => o.id === secondId).plan).to.equal('pro');
    });

    it('exits non-zero with a clear message for an unknown plan, organization or owner, and prints usage', async function () {
      this.timeout(120_000);
      await stop();
      const unknownPlan = await org('plan', randomUUID(), 'gold');
      expect(unknownPlan.code).to.equal(1);
      expect(unknownPlan.stderr).to.include('Unknown plan "gold"').and.include('unlimited');

      const id = randomUUID();
      const unknownOrg = await org('plan', id, 'pro');
      expect(unknownOrg.code).to.equal(1);
      expect(unknownOrg.stderr).to.include(`No organization has the id ${id}`);

      const nobody = uniqueEmail('nobody');
      const unknownOwner = await org('plan', nobody, 'pro');
      expect(unknownOwner.code).to.equal(1);
      expect(unknownOwner.stderr).to.include(`No organization is owned by ${nobody}`);

      const usage = await org('plan', id);
      expect(usage.code).to.equal(2);
      expect(usage.stderr).to.include('usage: npm run org -- plan');
    });
  });
});
