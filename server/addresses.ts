// Which network addresses the server may reach on a customer's behalf (webhook receivers, knowledge URL sources):
// public ones only, so a URL cannot steer a request into our own network or the cloud's metadata service. One
// list for every outgoing request a tenant can aim.
import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';

const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24],
  ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(net, prefix, 'ipv4');
// No `::ffff:0:0/96`: BlockList matches IPv4 addresses against IPv4-mapped IPv6 ranges, so it would block every IPv4
// address; an IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, `::ffff:a00:1`) is matched against the IPv4 ranges above.
for (const [net, prefix] of [
  ['::', 128], ['::1', 128], ['64:ff9b::', 96], ['100::', 64], ['2001::', 23], ['2001:db8::', 32], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8],
] as const) blocked.addSubnet(net, prefix, 'ipv6');

/** Whether an address is public: not private, loopback, link-local, unspecified, multicast, reserved or documentation. */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  return !blocked.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

export interface HostAddress {
  address: string;
  family: 4 | 6;
}

/** The addresses of a URL's host (a literal address is its own); [] when the name does not resolve. */
export async function addressesOf(url: URL): Promise<HostAddress[]> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const literal = isIP(host);
  if (literal) return [{ address: host, family: literal === 6 ? 6 : 4 }];
  try {
    return (await dnsLookup(host, { all: true, verbatim: true })).map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
  } catch {
    return [];
  }
}

/** A `lookup` for http(s).request that answers only the checked address (no second lookup a name could rebind). */
export function pinnedLookup(address: string, family: 4 | 6): LookupFunction {
  return ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options?.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as unknown as LookupFunction;
}
