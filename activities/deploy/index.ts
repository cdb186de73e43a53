/**
 * The deploy capability's activities, one module per workflow they serve: deploy.ts (deploy/<target>: releases),
 * config.ts (deploy-config: nginx fragments), both on the `commands` task queue, and work-order.ts (work-order/<id>:
 * the approved order queued) on the core queue.
 */
import { createConfigActivities } from './config';
import { createReleaseActivities, DeployActivityDeps } from './deploy';

export type { ConfigInput, ConfigTest } from './config';
export type { DeployActivityDeps, FileDigest, ReleaseFile } from './deploy';
export { createWorkOrderActivities } from './work-order';

/** Every activity the `commands` queue runs: a config change's compensation reloads nginx as a deploy does. */
export function createDeployActivities(deps: DeployActivityDeps) {
  return { ...createConfigActivities(deps), ...createReleaseActivities(deps) };
}

export type DeployActivities = ReturnType<typeof createDeployActivities>;
