/**
 * Error kinds the service answers with. Every error response has one JSON shape:
 *   { "ok": false, "error": "<code>", "message": "<human text>", "trace_id": "<X-Trace>", ...details }
 * The documented codes (docs/http-api.md#errors) are kept verbatim (value_must_be_object, empty_value_rejected).
 */

export const ERROR_STATUS = {
  invalid_request: 400,
  // JSON bodies (api/plugins/json-body.ts, core/strict-json.ts): what the ledger could not attest exactly.
  invalid_json: 400,
  invalid_utf8: 400,
  json_too_deep: 400,
  duplicate_member: 400,
  lone_surrogate: 400,
  noncharacter: 400,
  number_out_of_range: 400,
  number_too_precise: 400,
  value_must_be_object: 400,
  empty_value_rejected: 400,
  invalid_key: 400,
  unsupported_grant_type: 400,
  invalid_scope: 400,
  invalid_client: 401,
  unauthorized: 401,
  forbidden: 403,
  identity_check_failed: 403,
  not_found: 404,
  model_not_found: 404,
  method_not_allowed: 405,
  // A replica's internal route on one that no longer holds the ledger writer lease (api/routes/ledger/writer.ts).
  misdirected: 421,
  request_timeout: 408,
  conflict: 409,
  payload_too_large: 413,
  // An entry bundle holding an entry larger than the format's 65,535 bytes (docs/transparency.md#entry-bytes).
  entry_too_large: 422,
  // The hub as a witness (services/tlog/witness.ts): a checkpoint it must not cosign.
  checkpoint_inconsistent: 422,
  checkpoint_fork: 422,
  uri_too_long: 414,
  unsupported_media_type: 415,
  rate_limited: 429,
  quota_exceeded: 429,
  headers_too_large: 431,
  internal_error: 500,
  // The ledger is not an extension of the last signed checkpoint (services/tlog/checkpoint.ts): nothing is signed.
  ledger_fork: 500,
  upstream_failed: 502,
  unavailable: 503,
  overloaded: 503,
  timeout: 504
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class AppError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {}
  ) {
    super(message);
    this.name = 'AppError';
    this.status = ERROR_STATUS[code];
  }
}

export const unauthorized = (message: string) => new AppError('unauthorized', message);
export const notFound = (message: string) => new AppError('not_found', message);
export const conflict = (message: string, details: Record<string, unknown> = {}) =>
  new AppError('conflict', message, details);
