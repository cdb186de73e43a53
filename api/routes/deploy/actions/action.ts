/**
 * What the actions of POST /dal/deploy share: the action names (the body's discriminator), the target a release
 * or a config names, and the shape of an action's answer, a status with the body its response schema in dal.ts
 * serialises.
 */
import { z } from 'zod';
import { TARGET_PATTERN } from '../../../../core/deploy/web';

export const DEPLOY_ACTIONS = [
  'deploy',
  'rollback',
  'config',
  'port_alloc',
  'port_release',
  'port_register',
  'did_register',
  'did_revoke',
  'inbox_push',
  'inbox_ack'
] as const;
export type DeployAction = (typeof DEPLOY_ACTIONS)[number];

/** 200 answered, 202 held for approval, 502 a workflow step failed and was compensated. */
export const answer = <S extends 200 | 202 | 502, B>(status: S, body: B) => ({ status, body });

export const target = z
  .string()
  .regex(TARGET_PATTERN)
  .describe('one URL path segment: lower-case letters, digits, _ and -; served at /<target>/');
