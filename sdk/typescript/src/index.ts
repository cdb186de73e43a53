/** @zhongshu-hub/node-sdk: a node's client for the zhongshu-hub federation hub (docs/node-sdk.md). */
export {
  HubNode,
  type HubNodeOptions,
  type Instruction,
  type InstructionAck,
  type WriteHandle,
  type WriteOutcome
} from './client';
export { Outbox, type OutboxRecord, type OutboxSync, type TruthInput, type WriteState } from './outbox';
export { Presence, type NodeState, type Registration, type HeartbeatReport } from './presence';
export { LedgerVerifier } from './verifier';
export { TruthWriter } from './truth-writer';
export {
  TaskWorker,
  TaskCompletion,
  type ClaimedTask,
  type TaskArtifact,
  type TaskContext,
  type TaskEvent,
  type TaskHandler,
  type TaskMessage,
  type TaskPart
} from './worker';
export { shellTaskHandler, httpTaskHandler, type ShellTaskOptions, type HttpTaskOptions } from './task-handlers';
export {
  parseVerifierKey,
  parseWitnessKey,
  verifiedCosigners,
  verifyCheckpoint,
  openNote,
  VerificationError,
  type Checkpoint,
  type VerifierKey
} from './checkpoint';
export { canonicalJson, leafBytes, type LeafFields } from './canonical-json';
export { leafHash, nodeHash, rootOf, verifyInclusion, verifyConsistency, rootFromInclusionProof } from './merkle';
export { loadCredentials, saveCredentials, CredentialsError, type NodeCredentials } from './credentials';
export { HubHttp, HubError, NetworkError, Backoff, retryAfterMs, type Fetch } from './http';
export { silentLogger, type Logger } from './logger';
