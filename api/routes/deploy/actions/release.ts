/**
 * deploy { target, content | files } and rollback { target }: run the deploy/<target> workflow (an atomic release
 * with compensation) and answer its outcome; 502 deploy_failed names the failed step when it was compensated.
 */
import type { Client } from '@temporalio/client';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Config } from '../../../../core/config.node';
import {
  DEFAULT_FILE,
  FILE_PATH_PATTERN,
  MAX_FILE_BYTES,
  MAX_FILES,
  MAX_RELEASE_BYTES
} from '../../../../core/deploy/web';
import { AppError } from '../../../../core/errors';
import { runDeploy } from '../../../../workflows/deploy/deploy.client';
import type { DeployAccess } from '../access';
import { INSTALL_HINT, type DeployWeb } from '../web';
import { answer, DEPLOY_ACTIONS, target } from './action';

const fileContent = z.string().max(MAX_FILE_BYTES);
export const deployBody = z
  .object({
    action: z.literal('deploy'),
    target,
    content: fileContent.optional().describe(`becomes ${DEFAULT_FILE} (and is the only file when files is absent)`),
    files: z
      .record(z.string().regex(FILE_PATH_PATTERN).max(800), fileContent)
      .refine((files) => Object.keys(files).length > 0, 'files, when given, names at least one file')
      .meta({ minProperties: 1 })
      .optional()
      .describe(`more files: relative path → content (at most ${MAX_FILES}, ${MAX_RELEASE_BYTES} bytes in all)`)
  })
  .strict()
  // The handler refuses a deploy with neither (400 naming body.content); the document says so.
  .meta({ anyOf: [{ required: ['content'] }, { required: ['files'] }] });
export const rollbackBody = z.object({ action: z.literal('rollback'), target }).strict();

const stepSchema = z.object({ step: z.string(), ok: z.boolean(), error: z.string().optional() });
export const deployAnswer = z.object({
  ok: z.boolean().describe('true when the release is live; false when a step failed and was compensated'),
  action: z.enum(DEPLOY_ACTIONS),
  outcome: z.enum(['deployed', 'compensated']),
  target: z.string(),
  release_id: z.string(),
  previous_release: z.string().nullable(),
  current_release: z.string().nullable(),
  failed_step: z.string().nullable(),
  error: z.string().nullable(),
  url: z.string().describe('where nginx serves the target'),
  files: z.array(z.object({ path: z.string(), sha256: z.string() })),
  pruned: z.array(z.string()),
  steps: z.array(stepSchema),
  workflow_id: z.string(),
  ledger_seq: z.number().int().nullable()
});
export const failedAnswer = deployAnswer
  .omit({ ok: true, error: true })
  .extend({
    ok: z.literal(false),
    error: z.literal('deploy_failed'),
    message: z.string(),
    trace_id: z.string(),
    reason: z.string().describe('why the failed step failed')
  })
  .passthrough();

/** The release's files (content as index.html, then files), refused unless they form one valid release. */
function releaseFiles(body: z.infer<typeof deployBody>): { path: string; content: string }[] {
  const map = new Map<string, string>();
  if (body.content !== undefined) map.set(DEFAULT_FILE, body.content);
  for (const [p, c] of Object.entries(body.files ?? {})) map.set(p, c);
  if (map.size === 0)
    throw new AppError('invalid_request', 'deploy needs content or files', {
      fields: [{ field: 'body.content', message: 'content or files is required' }]
    });
  if (map.size > MAX_FILES)
    throw new AppError('invalid_request', `at most ${MAX_FILES} files`, {
      fields: [{ field: 'body.files', message: `at most ${MAX_FILES} files` }]
    });
  const paths = [...map.keys()];
  // A path that is also a directory of another (a and a/b) cannot both be files.
  const clash = paths.find((p) => paths.some((q) => q.startsWith(`${p}/`)));
  if (clash)
    throw new AppError('invalid_request', `${clash} is both a file and a directory`, {
      fields: [{ field: 'body.files', message: `${clash} is both a file and a directory` }]
    });
  const total = [...map.values()].reduce((n, c) => n + Buffer.byteLength(c), 0);
  if (total > MAX_RELEASE_BYTES)
    throw new AppError('payload_too_large', `a release holds at most ${MAX_RELEASE_BYTES} bytes (got ${total})`);
  return [...map].map(([path, content]) => ({ path, content }));
}

export function createReleaseActions(deps: {
  temporal: Client;
  config: Pick<Config, 'TEMPORAL_TASK_QUEUE' | 'DEPLOY_KEEP_RELEASES' | 'SERVICE_DID'>;
  access: DeployAccess;
  web: DeployWeb;
}) {
  const { temporal, config, access, web } = deps;
  const release = async (body: z.infer<typeof deployBody> | z.infer<typeof rollbackBody>, request: FastifyRequest) => {
    await access.allow(request, 'deploy');
    const why = web.unavailable();
    if (why) throw new AppError('unavailable', why, { install: INSTALL_HINT });
    const files = body.action === 'deploy' ? releaseFiles(body) : undefined;
    const result = await runDeploy(temporal, config.TEMPORAL_TASK_QUEUE, {
      mode: body.action,
      target: body.target,
      files,
      keep: config.DEPLOY_KEEP_RELEASES,
      hub_did: config.SERVICE_DID,
      actor: request.principal!.id
    });
    const outcomeBody = {
      ok: result.outcome === 'deployed',
      action: body.action,
      outcome: result.outcome,
      target: result.target,
      release_id: result.release_id,
      previous_release: result.previous_release,
      current_release: result.current_release,
      failed_step: result.failed_step,
      error: result.error,
      url: `${web.url}/${result.target}/`,
      files: result.files,
      pruned: result.pruned,
      steps: result.steps,
      workflow_id: result.workflow_id,
      ledger_seq: result.ledger_seq
    };
    if (result.outcome === 'deployed') return answer(200, outcomeBody);
    // The one error shape, with the outcome beside it: which step failed, why, and that it was compensated.
    const { ok: _ok, error: _error, ...rest } = outcomeBody;
    const reason = result.error ?? 'unknown';
    return answer(502, {
      ...rest,
      ok: false as const,
      error: 'deploy_failed' as const,
      reason,
      message: `deploy_failed: ${result.failed_step} failed (${reason}); compensated, ${result.previous_release ?? 'no release'} is current`,
      trace_id: String(request.id)
    });
  };
  return { deploy: release, rollback: release };
}
