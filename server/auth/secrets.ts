// Random secrets for codes and links, stored only as keyed hashes and compared in constant time.
import { createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';

/** A 6-digit code from the CSPRNG (leading zeros kept). */
export function generateOtpCode(): string {
  return randomInt(0, 1_000_000).toString().padStart(6, '0');
}

/** A URL-safe single-use token for links (invitations, password reset). */
export function generateLinkToken(): string {
  return randomBytes(32).toString('base64url');
}

/** Keyed hash, so a leaked table of 6-digit codes cannot be reversed without the server's key. */
export function hashSecret(key: string, value: string): string {
  return createHmac('sha256', key).update(value).digest('hex');
}

/** Constant-time comparison whatever the lengths (lengths are hidden by hashing both sides first). */
export function safeEqual(a: string, b: string): boolean {
  const ha = createHmac('sha256', 'compare').update(a).digest();
  const hb = createHmac('sha256', 'compare').update(b).digest();
  return timingSafeEqual(ha, hb);
}
