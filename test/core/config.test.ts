/** Configuration: defaults, and a start that stops on an invalid value naming the variable. */
import { ConfigError, loadConfig } from '../../core/config.node';

describe('configuration from the environment', () => {
  it('gives the documented defaults', () => {
    const c = loadConfig({});
    expect([c.PORT, c.BACKUP_PORT, c.HUB_PORT, c.COMMERCIAL_PORT, c.MEMORY_PORT, c.DAEMON_PORT]).toEqual([
      8080, 8081, 9001, 9099, 9120, 9123
    ]);
    expect(c.NODE_OFFLINE_AFTER_S).toBe(90);
    expect(c.TRUTH_DAILY_QUOTA).toBe(2000);
    expect(c.publicUrl).toBe('http://localhost:8080');
    expect(c.dataDir.endsWith('.data')).toBe(true);
  });

  it('names each invalid variable and what is allowed', () => {
    let error: unknown;
    try {
      loadConfig({ PORT: 'eighty', LOG_LEVEL: 'loud', MONGODB_URI: 'postgres://x' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toMatch(/PORT="eighty"/);
    expect(message).toMatch(/LOG_LEVEL="loud".*(fatal|info)/);
    expect(message).toMatch(/MONGODB_URI="postgres:\/\/x": must start with mongodb:\/\//);
  });

  it('treats empty strings as unset', () => {
    expect(loadConfig({ PORT: '' }).PORT).toBe(8080);
  });

  it('reads the high-risk truth types as a comma-separated list', () => {
    expect(loadConfig({ TRUTH_HIGH_RISK_TYPES: 'risk, protocol' }).TRUTH_HIGH_RISK_TYPES).toEqual(['risk', 'protocol']);
  });

  it('reads the task queue kinds a worker polls: all by default, a subset for one queue per process', () => {
    expect(loadConfig({}).WORKER_TASK_QUEUES).toEqual(['core', 'models', 'commands']);
    expect(loadConfig({ WORKER_TASK_QUEUES: 'models' }).WORKER_TASK_QUEUES).toEqual(['models']);
    expect(() => loadConfig({ WORKER_TASK_QUEUES: 'core,gpu' })).toThrow(/WORKER_TASK_QUEUES/);
    expect(loadConfig({}).JSON_MAX_DEPTH).toBe(64);
  });
});
