/**
 * Who a request comes from, for per-address limits (the registration limit, the trial chat): the connecting peer, or,
 * when that peer is a trusted proxy (TRUSTED_PROXIES, TRIAL_TRUSTED_PROXIES: addresses or CIDR ranges, such as the
 * load balancer's network), the right-most X-Forwarded-For entry that is not a trusted proxy itself (entries to its
 * left could be written by the client). An entry that is not an IP address stops the walk at the proxy that sent it.
 */
import net from 'node:net';
import type { FastifyRequest } from 'fastify';

export interface TrustedProxies {
  has(address: string): boolean;
}

/** The proxies of `list` (addresses and CIDR ranges, IPv4 or IPv6; validated by the config). */
export function trustedProxies(list: readonly string[]): TrustedProxies {
  const block = new net.BlockList();
  for (const entry of list) {
    const [address = '', prefix] = entry.split('/');
    const family = net.isIPv6(address) ? 'ipv6' : 'ipv4';
    if (prefix === undefined) block.addAddress(address, family);
    else block.addSubnet(address, Number(prefix), family);
  }
  return {
    has: (address) =>
      list.length > 0 && net.isIP(address) !== 0 && block.check(address, net.isIPv6(address) ? 'ipv6' : 'ipv4')
  };
}

export function clientAddress(request: Pick<FastifyRequest, 'ip' | 'headers'>, trusted: TrustedProxies): string {
  const plain = (a: string) => (a.startsWith('::ffff:') && net.isIPv4(a.slice(7)) ? a.slice(7) : a);
  let address = plain(request.ip);
  if (!trusted.has(address)) return address;
  const header = request.headers['x-forwarded-for'];
  const hops = (Array.isArray(header) ? header.join(',') : (header ?? ''))
    .split(',')
    .map((h) => h.trim())
    .filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = plain(hops[i]!);
    if (!net.isIP(hop)) break;
    address = hop;
    if (!trusted.has(hop)) break;
  }
  return address;
}
