/** Federation: registration, node review, heartbeats and presence, the node and directory-tree workflows. */
import { z } from 'zod';
import { defineCapability } from './capability';
import { flag, positiveSeconds } from './values.node';

export const federationSettings = defineCapability({
  name: 'federation',
  title: 'Federation and nodes',
  page: 'docs/federation.md',
  readBy: ['api'],
  schema: z.object({
    REGISTER_RATE_LIMIT_PER_MIN: z.coerce
      .number()
      .int()
      .positive()
      .default(60)
      .describe(
        'Registrations (POST /a2a/register, the join form) per client address per calendar minute, across every API process (counted in MongoDB); then 429.'
      ),
    NODE_OFFLINE_AFTER_S: positiveSeconds.default(90).describe('Heartbeat silence before a node is offline.'),
    NODE_REVIEW_REQUIRED: flag('true').describe(
      'New nodes wait in `pending_review`; `false` starts them `offline` until a heartbeat.'
    ),
    NODE_CACHE_TTL_MS: z.coerce
      .number()
      .int()
      .min(0)
      .default(5000)
      .describe(
        "Heartbeat auth's node cache: how long an entry is trusted when the `node_changes` log cannot be read (while it can, entries stay exact, updated within about 1 s); below 1000 the log is not followed and entries are read again after this."
      ),
    PRESENCE_FLUSH_MS: z.coerce
      .number()
      .int()
      .min(0)
      .max(500)
      .default(100)
      .describe(
        'Least time between two writes of one presence shard by an API process; heartbeats of the shard arriving meanwhile share the next write, so an API process writes presence at most 16 / this a second however many heartbeats it takes; a heartbeat waits at most this plus one write.'
      ),
    PRESENCE_ACK_LAG_MS: z.coerce
      .number()
      .int()
      .min(0)
      .max(5000)
      .default(1000)
      .describe(
        "An approved node's heartbeat (online or offline) is answered before its presence write while its shard's writes are at most this far behind and not failing; 0: every heartbeat waits for its write."
      ),
    NODE_WORKFLOW_HISTORY_LIMIT: z.coerce
      .number()
      .int()
      .min(20)
      .default(2000)
      .describe('A node workflow continues as new past this many history events.'),
    HEARTBEAT_HISTORY_INTERVAL_S: positiveSeconds
      .default(60)
      .describe("One heartbeat sample per node per interval goes into the node's bounded history."),
    HEARTBEAT_HISTORY_SIZE: z.coerce
      .number()
      .int()
      .min(1)
      .max(240)
      .default(60)
      .describe('Heartbeat samples kept per node (the newest).'),
    TREE_PROPOSAL_HISTORY_LIMIT: z.coerce
      .number()
      .int()
      .min(20)
      .default(2000)
      .describe('A directory-tree proposal workflow continues as new past this many history events.')
  })
});
export type FederationConfig = z.infer<typeof federationSettings.schema>;
