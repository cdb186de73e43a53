/**
 * A2A protocol versions (A2A v1.0 §3.6): a client names the version it speaks in the `A2A-Version` service
 * parameter (an HTTP header, or a query parameter of that name), as Major.Minor (a patch number is ignored); an
 * empty or missing value means 0.3. The hub's interfaces serve 1.0 alone: 0.3's shapes are not 1.0's (its methods
 * are message/send and tasks/get, its parts carry `kind`, its roles and states are lower-case words, its card has
 * no supportedInterfaces), so a 0.3 request would be misread, or its answer misread by the client. It is refused
 * with VersionNotSupportedError naming the versions served (docs/a2a.md#protocol-versions).
 */
import { A2A_PROTOCOL_VERSION } from '../../core/version';

export const A2A_VERSION_HEADER = 'A2A-Version';
/** What an empty or missing A2A-Version means. */
export const A2A_DEFAULT_VERSION = '0.3';
/** The versions the interfaces serve (Major.Minor). */
export const A2A_VERSIONS = [A2A_PROTOCOL_VERSION] as const;

/**
 * The version a request asks for, as Major.Minor, whether it is served, and if not the VersionNotSupportedError
 * message (what was asked, and what is served). `value`: the header's (or the query parameter's), undefined when
 * absent.
 */
export function negotiateVersion(value: string | undefined): { requested: string; served: boolean; refusal: string } {
  const raw = (value ?? '').trim();
  const match = /^(\d{1,4})\.(\d{1,4})(?:\.\d{1,4})?$/.exec(raw);
  const requested =
    raw === '' ? A2A_DEFAULT_VERSION : match ? `${Number(match[1])}.${Number(match[2])}` : raw.slice(0, 40);
  const served = (A2A_VERSIONS as readonly string[]).includes(requested);
  const asked =
    raw === '' ? `${value === undefined ? 'missing' : 'empty'} (which means ${A2A_DEFAULT_VERSION})` : requested;
  return {
    requested,
    served,
    refusal: served
      ? ''
      : `A2A-Version ${asked} is not supported; this interface serves ${A2A_VERSIONS.join(', ')} ` +
        `(send the header ${A2A_VERSION_HEADER}: ${A2A_VERSIONS[0]})`
  };
}
