// Sign-up, sign-in, tokens, profile and password recovery. Nothing here tells whether an email is registered.
import type { Knex } from 'knex';
import type { Models } from '../../db/index.js';
import type { Organization } from '../../db/models/Organization.js';
import type { Role } from '../../db/models/Membership.js';
import type { User } from '../../db/models/User.js';
import type { OperatorActor } from '../auth/actor.js';
import type { OtpService } from '../auth/otp.js';
import type { PasswordHasher } from '../auth/passwords.js';
import { generateLinkToken, hashSecret } from '../auth/secrets.js';
import type { SessionMeta, SessionService, TokenPair } from '../auth/sessions.js';
import type { TokenService } from '../auth/tokens.js';
import { Conflict, InvalidOtp, Unauthorized, ValidationFailed } from '../errors.js';
import type { Mailer } from '../mail/index.js';
import { accountExistsMail, passwordResetMail, signupCodeMail } from '../mail/templates.js';
import type { OrganizationService } from './organizations.js';

const RESET_LINK_TTL_SECONDS = 3600;

export const normalizeEmail = (email: string) => email.trim().toLowerCase();

export interface SignedIn extends TokenPair {
  user: User;
  organization: Organization | null;
  role: Role | null;
  organizations: { organization: Organization; role: Role }[];
}

export class AuthService {
  constructor(
    private readonly deps: {
      models: Models;
      knex: Knex;
      passwords: PasswordHasher;
      otp: OtpService;
      sessions: SessionService;
      tokens: TokenService;
      mailer: Mailer;
      organizations: OrganizationService;
      /** Base of the links in mail: the operators' dashboard (APP_URL). */
      appUrl: string;
      tokenHashKey: string;
    },
  ) {}

  private get models() {
    return this.deps.models;
  }

  /** Step 1 of signup. A registered email gets a "you already have an account" mail instead of a code. */
  async initiateSignup(input: { name: string; email: string }): Promise<void> {
    const email = normalizeEmail(input.email);
    const existing = await this.models.User.query().findOne({ email });
    const code = await this.deps.otp.issue(email, 'email_verification', { name: input.name.trim() });
    if (existing) {
      await this.deps.mailer.queue(accountExistsMail(email, `${this.deps.appUrl}/login`));
    } else {
      await this.deps.mailer.queue(signupCodeMail(email, input.name.trim(), code));
    }
  }

  /** Sends a new code for a challenge that is still open; silently does nothing otherwise. */
  async resendOtp(input: { email: string; type: 'email_verification' | 'password_reset' }): Promise<void> {
    const email = normalizeEmail(input.email);
    if (input.type === 'password_reset') return this.forgotPassword({ email });
    const challenge = await this.deps.otp.find(email, 'email_verification');
    const user = await this.models.User.query().findOne({ email });
    if (!challenge || challenge.consumedAt || user) return;
    const name = typeof challenge.payload?.name === 'string' ? challenge.payload.name : '';
    const code = await this.deps.otp.issue(email, 'email_verification', challenge.payload);
    await this.deps.mailer.queue(signupCodeMail(email, name, code));
  }

  /** Step 2 (optional) of signup, or the code step of a password reset (which returns a reset token). */
  async verifyOtp(input: { email: string; code: string; type: 'email_verification' | 'password_reset' }): Promise<{ verified: true; resetToken?: string }> {
    const email = normalizeEmail(input.email);
    if (input.type === 'email_verification') {
      await this.deps.otp.verify(email, 'email_verification', input.code, { consume: false });
      return { verified: true };
    }
    await this.deps.otp.verify(email, 'password_reset', input.code, { consume: true });
    const user = await this.models.User.query().findOne({ email });
    // A code for an unknown email cannot exist unless forgot-password ran for it; it resets nothing.
    if (!user) throw new InvalidOtp();
    const resetToken = await this.createResetToken(user.id);
    return { verified: true, resetToken };
  }

  /** Step 3 of signup: the user, their organization and an accepted owner membership, in one transaction. */
  async completeSignup(
    input: { email: string; organizationName: string; password: string; domain?: string; code?: string },
    meta: SessionMeta,
  ): Promise<SignedIn> {
    const email = normalizeEmail(input.email);
    // An inline code is checked before the transaction so a wrong guess still counts against the challenge.
    if (input.code) await this.deps.otp.verify(email, 'email_verification', input.code, { consume: false });
    const passwordHash = await this.deps.passwords.hash(input.password);
    return this.deps.knex.transaction(async (trx) => {
      const challenge = await this.deps.otp.consumeVerified(email, 'email_verification', trx);
      if (await this.models.User.query(trx).findOne({ email })) throw new Conflict('An account with this email already exists');
      const name = typeof challenge.payload?.name === 'string' && challenge.payload.name ? challenge.payload.name : email.split('@')[0]!;
      const user = await this.models.User.query(trx).insertAndFetch({ email, name, passwordHash, emailVerifiedAt: new Date() });
      const organization = await this.deps.organizations.createWithOwner(user, { name: input.organizationName, domain: input.domain ?? null }, trx);
      await this.models.User.query(trx).patch({ lastOrganizationId: organization.id }).where('id', user.id);
      const tokens = await this.deps.sessions.create(user, organization.id, meta, trx);
      return { ...tokens, user, organization, role: 'owner' as Role, organizations: [{ organization, role: 'owner' as Role }] };
    });
  }

  async login(input: { email: string; password: string }, meta: SessionMeta): Promise<SignedIn> {
    const email = normalizeEmail(input.email);
    const user = await this.models.User.query().findOne({ email });
    // verify() spends a bcrypt comparison even for unknown emails, so the answer time does not tell them apart.
    const ok = await this.deps.passwords.verify(input.password, user?.passwordHash);
    if (!user || !ok) throw new Unauthorized('Invalid email or password');
    const context = await this.organizationContext(user);
    const tokens = await this.deps.sessions.create(user, context.organization?.id ?? null, meta);
    if (context.organization && context.organization.id !== user.lastOrganizationId) {
      await this.models.User.query().patch({ lastOrganizationId: context.organization.id }).where('id', user.id);
    }
    return { ...tokens, user, ...context };
  }

  /** The organizations a user can work in, and the active one: the last used if still accepted, else the first. */
  async organizationContext(user: User, activeOrgId?: string | null): Promise<Omit<SignedIn, keyof TokenPair | 'user'>> {
    const organizations = await this.deps.organizations.listForUser(user.id);
    const preferred = activeOrgId !== undefined ? activeOrgId : user.lastOrganizationId;
    const active = organizations.find((o) => o.organization.id === preferred) ?? (activeOrgId === undefined ? organizations[0] : undefined);
    return { organization: active?.organization ?? null, role: active?.role ?? null, organizations };
  }

  async refresh(refreshToken: string): Promise<TokenPair> {
    return this.deps.sessions.rotate(refreshToken);
  }

  async logout(actor: OperatorActor, refreshToken?: string): Promise<void> {
    const sessionIds = [actor.sessionId];
    if (refreshToken) {
      // A refresh token of another of the caller's sessions is revoked too; anything else is ignored.
      try {
        const claims = this.deps.tokens.verifyRefresh(refreshToken);
        if (claims.sub === actor.userId && claims.sid !== actor.sessionId) sessionIds.push(claims.sid);
      } catch {
        /* an expired or foreign refresh token changes nothing about this logout */
      }
    }
    await this.deps.sessions.revoke(sessionIds, actor.userId, 'logout');
  }

  async profile(actor: OperatorActor): Promise<{ user: User } & Omit<SignedIn, keyof TokenPair | 'user'>> {
    const user = await this.models.User.query().findById(actor.userId);
    if (!user) throw new Unauthorized();
    return { user, ...(await this.organizationContext(user, actor.orgId)) };
  }

  async updateProfile(actor: OperatorActor, input: { name?: string; avatarUrl?: string | null }): Promise<User> {
    const patch: Partial<User> = {};
    if (input.name !== undefined) patch.name = input.name.trim();
    if (input.avatarUrl !== undefined) patch.avatarUrl = input.avatarUrl;
    return this.models.User.query().patchAndFetchById(actor.userId, patch);
  }

  /** Keeps the caller's own session and revokes every other one. */
  async changePassword(actor: OperatorActor, input: { currentPassword: string; newPassword: string }): Promise<void> {
    const user = await this.models.User.query().findById(actor.userId);
    if (!user || !(await this.deps.passwords.verify(input.currentPassword, user.passwordHash))) {
      throw new ValidationFailed('The current password is not correct', [{ field: 'currentPassword', message: 'is not correct' }]);
    }
    const passwordHash = await this.deps.passwords.hash(input.newPassword);
    await this.deps.knex.transaction(async (trx) => {
      await this.models.User.query(trx).patch({ passwordHash, passwordChangedAt: new Date() }).where('id', user.id);
      await this.deps.sessions.revokeAllOf(user.id, 'password_changed', actor.sessionId, trx);
    });
  }

  /**
   * Always the same answer. Known and unknown emails both get a code challenge written (same work);
   * only a known email gets the mail with the code and a reset link.
   */
  async forgotPassword(input: { email: string }): Promise<void> {
    const email = normalizeEmail(input.email);
    const user = await this.models.User.query().findOne({ email });
    const code = await this.deps.otp.issue(email, 'password_reset');
    const token = user ? await this.createResetToken(user.id) : generateLinkToken();
    if (user) {
      await this.deps.mailer.queue(passwordResetMail(email, code, `${this.deps.appUrl}/reset-password?token=${encodeURIComponent(token)}`));
    }
  }

  async resetPasswordWithOtp(input: { email: string; code: string; newPassword: string }): Promise<void> {
    const email = normalizeEmail(input.email);
    await this.deps.otp.verify(email, 'password_reset', input.code, { consume: true });
    const user = await this.models.User.query().findOne({ email });
    if (!user) throw new InvalidOtp();
    await this.setPasswordAfterReset(user, input.newPassword);
  }

  async resetPasswordWithToken(input: { token: string; newPassword: string }): Promise<void> {
    const tokenHash = hashSecret(this.deps.tokenHashKey, input.token);
    const reset = await this.models.PasswordReset.query().findOne({ tokenHash });
    if (!reset || reset.usedAt || reset.expiresAt.getTime() <= Date.now()) throw new InvalidOtp('The reset link is invalid or has expired');
    const used = await this.models.PasswordReset.query().patch({ usedAt: new Date() }).where('id', reset.id).whereNull('usedAt');
    if (used === 0) throw new InvalidOtp('The reset link is invalid or has expired');
    const user = await this.models.User.query().findById(reset.userId);
    if (!user) throw new InvalidOtp('The reset link is invalid or has expired');
    await this.setPasswordAfterReset(user, input.newPassword);
  }

  /** A reset signs the user out everywhere and retires every other open reset link and reset code. */
  private async setPasswordAfterReset(user: User, newPassword: string): Promise<void> {
    const passwordHash = await this.deps.passwords.hash(newPassword);
    await this.deps.knex.transaction(async (trx) => {
      await this.models.User.query(trx).patch({ passwordHash, passwordChangedAt: new Date() }).where('id', user.id);
      await this.models.PasswordReset.query(trx).patch({ usedAt: new Date() }).where('userId', user.id).whereNull('usedAt');
      await this.deps.otp.retire(user.email, 'password_reset', trx);
      await this.deps.sessions.revokeAllOf(user.id, 'password_reset', null, trx);
    });
  }

  private async createResetToken(userId: string): Promise<string> {
    const token = generateLinkToken();
    await this.models.PasswordReset.query().insert({
      userId,
      tokenHash: hashSecret(this.deps.tokenHashKey, token),
      expiresAt: new Date(Date.now() + RESET_LINK_TTL_SECONDS * 1000),
    });
    return token;
  }
}
