// Webhook targets must be public: a URL is checked when saved and again at every send, and the connection goes to
// the very address that was checked (a custom DNS lookup), so a name re-pointed after the check (DNS rebinding)
// cannot reach an internal service.
import { isIP } from 'node:net';
import { addressesOf, isPublicAddress, type HostAddress } from '../../addresses.js';

export class UnsafeTarget extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnsafeTarget';
  }
}

export interface TargetPolicy {
  /** WEBHOOKS_ALLOW_PRIVATE: http and private addresses allowed (development and tests). */
  allowPrivate: boolean;
}

/** The URL's problems as a sentence, or null: https only (http too when private targets are allowed). */
export function urlProblem(raw: string, policy: TargetPolicy): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'is not a valid URL';
  }
  if (url.protocol !== 'https:' && !(policy.allowPrivate && url.protocol === 'http:')) return 'must be an https URL';
  if (url.username || url.password) return 'must not carry credentials';
  return null;
}

export interface Target extends HostAddress {
  url: URL;
}

/** Checked targets whose host is an address: nothing about them can change, so each is checked once. */
const literalTargets = new Map<string, Target>();

/** Resolves the URL's host and returns one address that is allowed, or throws UnsafeTarget. */
export async function resolveTarget(raw: string, policy: TargetPolicy): Promise<Target> {
  const key = `${policy.allowPrivate ? 1 : 0} ${raw}`;
  const known = literalTargets.get(key);
  if (known) return known;
  const target = await checkTarget(raw, policy);
  if (isIP(target.url.hostname.replace(/^\[|\]$/g, ''))) {
    if (literalTargets.size >= 10_000) literalTargets.clear();
    literalTargets.set(key, target);
  }
  return target;
}

async function checkTarget(raw: string, policy: TargetPolicy): Promise<Target> {
  const problem = urlProblem(raw, policy);
  if (problem) throw new UnsafeTarget(`The URL ${problem}`);
  const url = new URL(raw);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const addresses = await addressesOf(url);
  if (addresses.length === 0) throw new UnsafeTarget(`The host ${host} does not resolve`);
  // Every address must be public: a name that also points inside could be steered there.
  if (!policy.allowPrivate && addresses.some((a) => !isPublicAddress(a.address))) {
    throw new UnsafeTarget(`The host ${host} resolves to a private, loopback or reserved address`);
  }
  return { url, ...addresses[0]! };
}
