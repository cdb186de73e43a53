/** Versions the service reports (docs/http-api.md#listeners, docs/a2a.md). */
export const SERVICE_NAME = 'zhongshu-hub';
export const HUB_VERSION = '2.3.0';
export const FEDERATION_API_VERSION = '2.0.0';
export const TRUTH_GATEWAY_VERSION = 'V3.0';
export const A2A_PROTOCOL_VERSION = '1.0';
