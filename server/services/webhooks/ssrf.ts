// Webhook targets must be public: a URL is checked when saved and again at every send, and the connection goes to
// the very address that was checked (a custom DNS lookup), so a name re-pointed after the check (DNS rebinding)
// cannot reach an internal service.
import { lookup as dnsLookup } from 'node:dns/promises';
import type { LookupFunction } from 'node:net';
import { BlockList, isIP } from 'node:net';

const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24],
  ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['64:ff9b::', 96], ['2001:db8::', 32]] as const) {
  blocked.addSubnet(net, prefix, 'ipv6');
}

/**
 * Whether an address is private, loopback, link-local, unspecified, multicast or reserved. An IPv4 address written
 * as IPv6 (`::ffff:10.0.0.1`, `::ffff:a00:1`) is checked by BlockList against the IPv4 ranges.
 */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family !== 6) return true;
  return blocked.check(address, 'ipv6');
}

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

export interface Target {
  url: URL;
  address: string;
  family: 4 | 6;
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
  let addresses: { address: string; family: number }[];
  try {
    addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await dnsLookup(host, { all: true, verbatim: true });
  } catch {
    throw new UnsafeTarget(`The host ${host} does not resolve`);
  }
  if (addresses.length === 0) throw new UnsafeTarget(`The host ${host} does not resolve`);
  // Every address must be public: a name that also points inside could be steered there.
  if (!policy.allowPrivate && addresses.some((a) => isPrivateAddress(a.address))) {
    throw new UnsafeTarget(`The host ${host} resolves to a private, loopback or reserved address`);
  }
  const chosen = addresses[0]!;
  return { url, address: chosen.address, family: chosen.family === 6 ? 6 : 4 };
}

/** A `lookup` for http(s).request that answers only the checked address. */
export function pinnedLookup(address: string, family: 4 | 6): LookupFunction {
  return ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options?.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as unknown as LookupFunction;
}
