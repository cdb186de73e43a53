/** The kinds of value the settings share: ports, whole seconds, comma-separated lists, proxy lists, true/false. */
import net from 'node:net';
import { z } from 'zod';

export const port = z.coerce.number().int().min(0).max(65535);
export const positiveSeconds = z.coerce.number().int().positive();
export const csv = z.string().transform((s) =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean)
);

/** `true` or `false`, read as a boolean. */
export const flag = (fallback: 'true' | 'false') =>
  z
    .enum(['true', 'false'])
    .default(fallback)
    .transform((v) => v === 'true');

/** An IP address or a CIDR range (IPv4 or IPv6), as the trusted proxy lists take them. */
export function isAddressOrRange(entry: string): boolean {
  const [address = '', prefix, ...rest] = entry.split('/');
  const family = net.isIP(address);
  if (family === 0 || rest.length > 0) return false;
  // (A /0 would trust every address: refused.)
  return (
    prefix === undefined ||
    (/^\d{1,3}$/.test(prefix) && Number(prefix) >= 1 && Number(prefix) <= (family === 4 ? 32 : 128))
  );
}
/** Comma-separated proxy addresses and CIDR ranges (api/client-address.ts). */
export const proxyList = csv.pipe(
  z.array(z.string().refine(isAddressOrRange, 'an IP address or a CIDR range such as 10.0.0.0/8 (not /0)'))
);
