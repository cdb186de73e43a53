/**
 * config { target, fragment }: a target's nginx fragment checked here, then written, tested with `nginx -t` and
 * loaded by the deploy-config workflow. A fragment nginx refuses is 400 with the previous config restored; a failed
 * reload is 502 config_failed, compensated.
 */
import type { Client } from '@temporalio/client';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Config } from '../../../../core/config.node';
import { FragmentError, MAX_FRAGMENT_BYTES, parseFragment } from '../../../../core/deploy/fragment';
import { AppError } from '../../../../core/errors';
import { runDeployConfig } from '../../../../workflows/deploy/config.client';
import type { DeployAccess } from '../access';
import { INSTALL_HINT, type DeployWeb } from '../web';
import { answer, target } from './action';

export const configBody = z
  .object({
    action: z.literal('config'),
    target,
    fragment: z
      .string()
      .max(MAX_FRAGMENT_BYTES)
      .describe(
        'nginx location and/or server blocks for this target (docs/deploy.md#actions: locations under /<target>/, server blocks with a server_name and no listen, ' +
          'root/alias only @current[/path], proxy_pass only to a pool port; no include, load_module, listen, logs or files elsewhere); empty removes the fragment'
      )
  })
  .strict();
export const configAnswer = z.object({
  ok: z.literal(true),
  action: z.literal('config'),
  outcome: z.literal('configured'),
  target: z.string(),
  removed: z.boolean().describe('the fragment was empty: the target has no fragment now'),
  steps: z.array(z.object({ step: z.string(), ok: z.boolean(), error: z.string().optional() })),
  workflow_id: z.string(),
  ledger_seq: z.number().int().nullable()
});
export const configFailed = z
  .object({
    ok: z.literal(false),
    error: z.literal('config_failed'),
    message: z.string(),
    trace_id: z.string(),
    outcome: z.literal('compensated'),
    failed_step: z.string(),
    nginx_error: z.string().nullable()
  })
  .passthrough();

export function createConfigAction(deps: {
  temporal: Client;
  config: Pick<Config, 'TEMPORAL_TASK_QUEUE' | 'PORT_POOL' | 'SERVICE_DID'>;
  access: DeployAccess;
  web: DeployWeb;
}) {
  const { temporal, config, access, web } = deps;
  return async (body: z.infer<typeof configBody>, request: FastifyRequest) => {
    await access.allow(request, 'deploy');
    const why = web.unavailable();
    if (why) throw new AppError('unavailable', why, { install: INSTALL_HINT });
    try {
      parseFragment(body.fragment, {
        target: body.target,
        poolFirst: config.PORT_POOL.first,
        poolLast: config.PORT_POOL.last
      });
    } catch (err) {
      if (!(err instanceof FragmentError)) throw err;
      throw new AppError('invalid_request', `fragment refused: ${err.message}`, {
        fields: [{ field: 'body.fragment', message: err.message }]
      });
    }
    const result = await runDeployConfig(temporal, config.TEMPORAL_TASK_QUEUE, {
      target: body.target,
      fragment: body.fragment,
      pool: config.PORT_POOL,
      hub_did: config.SERVICE_DID,
      actor: request.principal!.id
    });
    const common = {
      target: result.target,
      removed: result.removed,
      steps: result.steps,
      workflow_id: result.workflow_id,
      ledger_seq: result.ledger_seq
    };
    if (result.outcome === 'configured')
      return answer(200, { ok: true as const, action: 'config' as const, outcome: 'configured' as const, ...common });
    if (result.outcome === 'rejected') {
      // nginx -t refused the merged config: the previous files are back and nginx serves as before.
      throw new AppError(
        'invalid_request',
        `nginx -t refused the merged config; the previous configuration was restored: ${result.nginx_error ?? ''}`,
        {
          fields: [{ field: 'body.fragment', message: result.nginx_error ?? 'nginx -t failed' }],
          nginx_error: result.nginx_error,
          outcome: 'rejected',
          restored: true,
          ...common
        }
      );
    }
    return answer(502, {
      ok: false as const,
      error: 'config_failed' as const,
      outcome: 'compensated' as const,
      failed_step: result.failed_step ?? 'unknown',
      nginx_error: result.nginx_error,
      message: `config_failed: ${result.failed_step} failed (${result.nginx_error ?? 'unknown'}); the previous configuration was restored`,
      trace_id: String(request.id),
      ...common
    });
  };
}
