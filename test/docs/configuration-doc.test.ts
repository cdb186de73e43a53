/**
 * docs/configuration.md is generated from the configuration schema (npm run docs:config): it fails here when the
 * committed page is stale. The schema is the capabilities' slices composed, each setting in exactly one, described.
 */
import fs from 'node:fs';
import type { z } from 'zod';
import { CAPABILITIES, configSchema, loadConfig } from '../../core/config.node';
import { ledgerSettings } from '../../core/config/ledger.node';
import { CONFIGURATION_DOC, renderConfigurationDoc } from '../../scripts/docs/configuration';
import { settingFacts } from '../../scripts/docs/setting-facts';

/** The first line where two texts differ, for a failure message a person can act on. */
function firstDifference(committed: string, generated: string): string {
  const a = committed.split('\n');
  const b = generated.split('\n');
  const line = a.findIndex((text, i) => text !== b[i]);
  const at = line === -1 ? a.length : line;
  return `line ${at + 1}:\n  committed: ${a[at] ?? '(end of file)'}\n  generated: ${b[at] ?? '(end of file)'}`;
}

describe('docs/configuration.md', () => {
  it('is what npm run docs:config writes from the schema', () => {
    const committed = fs.existsSync(CONFIGURATION_DOC) ? fs.readFileSync(CONFIGURATION_DOC, 'utf8') : '';
    const generated = renderConfigurationDoc();
    if (committed !== generated)
      throw new Error(
        `docs/configuration.md is stale: run \`npm run docs:config\` and commit it (${firstDifference(committed, generated)})`
      );
  });
});

describe('the configuration schema by capability', () => {
  it('holds every setting in exactly one capability', () => {
    const inSlices = CAPABILITIES.flatMap((c) => Object.keys(c.schema.shape));
    expect(new Set(inSlices).size).toBe(inSlices.length);
    expect([...inSlices].sort()).toEqual(Object.keys(configSchema.shape).sort());
  });

  it('describes every setting, with the processes that read it', () => {
    for (const c of CAPABILITIES)
      for (const [name, schema] of Object.entries(c.schema.shape as Record<string, z.ZodType>)) {
        const facts = settingFacts(name, schema, c.readBy);
        expect({ name, described: facts.description.length > 10, read: facts.readBy.length > 0 }).toEqual({
          name,
          described: true,
          read: true
        });
      }
  });

  it('gives a capability its slice alone, parsed as the whole schema parses it', () => {
    const env = { TRUTH_DAILY_QUOTA: '7', TRUTH_HIGH_RISK_TYPES: 'risk, protocol' };
    const slice = ledgerSettings.schema.parse(env);
    const whole = loadConfig(env);
    expect(slice).toEqual(Object.fromEntries(Object.keys(slice).map((k) => [k, whole[k as keyof typeof whole]])));
    expect(slice.TRUTH_DAILY_QUOTA).toBe(7);
  });
});
