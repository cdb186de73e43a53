/**
 * The key every per-address limit counts under (the registration limit of @fastify/rate-limit in api/app.ts, the
 * trial chat's limit): the client address, or for IPv6 its /64.
 */

/**
 * Rate limits count per client address; IPv6 clients per /64 (one host usually holds a whole /64, so counting per
 * address would let it rotate through them).
 */
export function rateLimitKey(request: { ip: string }): string {
  const ip = request.ip;
  if (!ip.includes(':') || ip.startsWith('::ffff:')) return ip;
  const [head = '', tail = ''] = ip.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = ip.includes('::') ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right] : left;
  return `${groups
    .slice(0, 4)
    .map((g) => g.toLowerCase().replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
