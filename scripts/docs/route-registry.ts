/**
 * The endpoint directory as the service builds it, without starting the service: every listener is built (not
 * listening) on a context whose stores and clients are inert, so each route plugin registers its routes and their
 * directory declarations exactly as at a real start, and nothing connects anywhere.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../core/config.node';
import type { ServiceContext } from '../../api/context';
import { DirectoryEntry, EndpointDirectory } from '../../api/directory';
import { buildListeners } from '../../api/listeners';
import { createAdmissionGates } from '../../api/plugins/admission';

/** A value that answers every property read, call and construction with itself, and is not a promise. */
function inert(): unknown {
  const target = function () {} as unknown as object;
  const proxy: unknown = new Proxy(target, {
    get: (_t, prop) => {
      if (prop === 'then') return undefined;
      if (prop === Symbol.toPrimitive) return () => '';
      if (prop === Symbol.iterator) return function* () {};
      if (prop === Symbol.asyncIterator) return async function* () {};
      return proxy;
    },
    apply: () => proxy,
    construct: () => proxy as object
  });
  return proxy;
}

/** Every directory entry the listeners declare, sorted as GET /a2a/endpoints lists them. */
export async function registeredEndpoints(): Promise<DirectoryEntry[]> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'zhongshu-routes-'));
  try {
    const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent' });
    const directory = new EndpointDirectory();
    const ctx = new Proxy({} as ServiceContext, {
      get: (_t, prop) => {
        if (prop === 'config') return config;
        if (prop === 'directory') return directory;
        if (prop === 'admission') return createAdmissionGates({ truth_write: config.TRUTH_MAX_IN_FLIGHT });
        return inert();
      }
    });
    const listeners = await buildListeners(ctx);
    await Promise.all(listeners.map((l) => l.app.close()));
    return directory.entries();
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
