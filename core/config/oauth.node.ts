/** OAuth 2.0 / OIDC: the lifetime of the access tokens the hub issues. */
import { z } from 'zod';
import { defineCapability } from './capability';
import { positiveSeconds } from './values.node';

export const oauthSettings = defineCapability({
  name: 'oauth',
  title: 'OAuth and DPoP',
  page: 'docs/oauth.md',
  readBy: ['api'],
  schema: z.object({
    OAUTH_TOKEN_TTL_S: positiveSeconds
      .default(3600)
      .describe('Access token lifetime in seconds; a rotated-out OAuth key stays in the JWKS this long plus 60 s.')
  })
});
export type OauthConfig = z.infer<typeof oauthSettings.schema>;
