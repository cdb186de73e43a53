/**
 * GET /a2a/join/ : the join portal, a self-contained HTML page (api/static/join.html): what the federation is, the
 * five quick-start steps, the live count of online nodes (polls /a2a/dashboard) and a registration form that posts
 * to /a2a/register and shows the node id and the API key once. /a2a/join redirects to /a2a/join/.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config, FederationConfig } from '../../../core/config.node';
import { BRAND_CODES } from '../../../core/federation/vocabulary';
import { quickStartSteps } from '../../../core/quick-start';
import { noBody } from '../../response-docs';

const TEMPLATE = path.join(__dirname, '..', '..', 'static', 'join.html');

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

const CONTENT_SECURITY_POLICY =
  "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'";

export const joinPageRoutes: FastifyPluginAsyncZod<{
  config: Pick<Config, 'publicUrl'> & Pick<FederationConfig, 'NODE_OFFLINE_AFTER_S'>;
}> = async (app, { config }) => {
  const steps = quickStartSteps(config.publicUrl, config.NODE_OFFLINE_AFTER_S);
  const html = fs
    .readFileSync(TEMPLATE, 'utf8')
    .replace(
      '{{STEPS}}',
      Object.values(steps)
        .map((s) => `<li>${escapeHtml(s)}</li>`)
        .join('\n        ')
    )
    .replace('{{BRANDS}}', BRAND_CODES.map((b) => `<option value="${b}">${b}</option>`).join(''))
    .replaceAll('{{OFFLINE_AFTER_S}}', String(config.NODE_OFFLINE_AFTER_S));

  app.get(
    '/a2a/join/',
    {
      config: { auth: 'none' },
      schema: {
        response: { 200: { description: 'The join portal', content: { 'text/html': { schema: z.string() } } } }
      }
    },
    async (_request, reply) =>
      reply
        .type('text/html; charset=utf-8')
        .header('Cache-Control', 'no-cache')
        .header('Content-Security-Policy', CONTENT_SECURITY_POLICY)
        .send(html)
  );
  app.get(
    '/a2a/join',
    { config: { auth: 'none' }, schema: { response: { 301: noBody('Moved permanently to /a2a/join/') } } },
    async (_request, reply) => reply.redirect('/a2a/join/', 301)
  );
};
