// One-time codes: 6 digits, stored hashed, 10 minutes, single use, locked after 5 wrong tries, replaced by a new one.
import type { Knex } from 'knex';
import type { Models } from '../../db/index.js';
import type { OtpChallenge, OtpType } from '../../db/models/OtpChallenge.js';
import { InvalidOtp } from '../errors.js';
import { generateOtpCode, hashSecret, safeEqual } from './secrets.js';

export const OTP_TTL_SECONDS = 10 * 60;
export const OTP_MAX_ATTEMPTS = 5;
/** After a successful verification the signup has this long to be completed. */
const VERIFIED_GRACE_SECONDS = 30 * 60;

export class OtpService {
  constructor(
    private readonly models: Models,
    private readonly knex: Knex,
    private readonly hashKey: string,
  ) {}

  private hash(email: string, type: OtpType, code: string): string {
    return hashSecret(this.hashKey, `${type}:${email}:${code}`);
  }

  /** Issues a fresh code for (email, type), replacing any earlier one. Returns the plain code for the mail. */
  async issue(email: string, type: OtpType, payload: Record<string, unknown> = {}, trx?: Knex.Transaction): Promise<string> {
    const code = generateOtpCode();
    await (trx ?? this.knex)('otp_challenges')
      .insert({
        email,
        type,
        code_hash: this.hash(email, type, code),
        attempts: 0,
        expires_at: new Date(Date.now() + OTP_TTL_SECONDS * 1000),
        verified_at: null,
        consumed_at: null,
        payload: JSON.stringify(payload),
      })
      .onConflict(['email', 'type'])
      .merge(['code_hash', 'attempts', 'expires_at', 'verified_at', 'consumed_at', 'payload', 'updated_at']);
    return code;
  }

  async find(email: string, type: OtpType, trx?: Knex.Transaction): Promise<OtpChallenge | undefined> {
    return this.models.OtpChallenge.query(trx).findOne({ email, type });
  }

  /**
   * Checks a code. A wrong code costs one attempt; the fifth locks the challenge. With `consume`, the challenge
   * is used up now; otherwise it is marked verified (signup's optional explicit step) and consumed later.
   */
  async verify(email: string, type: OtpType, code: string, opts: { consume: boolean }, trx?: Knex.Transaction): Promise<OtpChallenge> {
    const challenge = await this.find(email, type, trx);
    if (!challenge || challenge.consumedAt || challenge.verifiedAt || challenge.attempts >= OTP_MAX_ATTEMPTS || challenge.expiresAt.getTime() <= Date.now()) {
      throw new InvalidOtp();
    }
    if (!safeEqual(challenge.codeHash, this.hash(email, type, code))) {
      await this.models.OtpChallenge.query(trx).increment('attempts', 1).where({ id: challenge.id, codeHash: challenge.codeHash });
      throw new InvalidOtp(challenge.attempts + 1 >= OTP_MAX_ATTEMPTS ? 'Too many wrong codes; ask for a new one' : undefined);
    }
    const now = new Date();
    const patch = opts.consume ? { consumedAt: now, verifiedAt: now } : { verifiedAt: now, expiresAt: new Date(Date.now() + VERIFIED_GRACE_SECONDS * 1000) };
    // Conditional update, re-checking what was read above: two requests racing with the same code cannot both
    // succeed, and wrong guesses counted meanwhile by concurrent requests (the lock), a replacing code or expiry win.
    const updated = await this.models.OtpChallenge.query(trx)
      .patch(patch)
      .where({ id: challenge.id, codeHash: challenge.codeHash })
      .where('attempts', '<', OTP_MAX_ATTEMPTS)
      .where('expiresAt', '>', now)
      .whereNull('verifiedAt')
      .whereNull('consumedAt');
    if (updated === 0) throw new InvalidOtp();
    return Object.assign(challenge, patch);
  }

  /** Uses up whatever challenge of (email, type) is still open, so its code stops working. */
  async retire(email: string, type: OtpType, trx?: Knex.Transaction): Promise<void> {
    await this.models.OtpChallenge.query(trx).patch({ consumedAt: new Date() }).where({ email, type }).whereNull('consumedAt');
  }

  /** Uses up a challenge verified earlier; fails when it was never verified, expired, or already used. */
  async consumeVerified(email: string, type: OtpType, trx?: Knex.Transaction): Promise<OtpChallenge> {
    const challenge = await this.find(email, type, trx);
    if (!challenge || !challenge.verifiedAt || challenge.consumedAt || challenge.expiresAt.getTime() <= Date.now()) {
      throw new InvalidOtp('Verify your email with the code first');
    }
    const updated = await this.models.OtpChallenge.query(trx).patch({ consumedAt: new Date() }).where('id', challenge.id).whereNull('consumedAt');
    if (updated === 0) throw new InvalidOtp('Verify your email with the code first');
    return challenge;
  }
}
