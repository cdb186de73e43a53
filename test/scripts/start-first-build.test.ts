/**
 * The first `npm start` builds the embedded servers, and says so while it happens: how long it takes, then a
 * progress line per tool while the build runs (in a log, as here, a line every ZH_PROGRESS_INTERVAL_MS, normally
 * 10 s; the test asks for 1 s because a warm Go build cache makes this build short). The tools directory starts
 * empty except for the Temporal CLI, so only FerretDB is built, with Go, for real.
 */
import fs from 'node:fs';
import path from 'node:path';
import { eventually } from '../support/service';
import { alive, killLeftovers, launch, recordedPids } from './launcher';

const seen = new Set<number>();
afterEach(() => killLeftovers(seen));

it('announces the first build with its expected duration and shows its progress while it runs', async () => {
  const toolsDir = fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, 'tools-'));
  const temporalBin = process.env.ZH_TEST_TEMPORAL_BIN!;
  const temporalDir = path.join(toolsDir, path.basename(path.dirname(temporalBin)));
  fs.mkdirSync(temporalDir);
  fs.symlinkSync(temporalBin, path.join(temporalDir, 'temporal'));

  // With a cold Go cache the build takes minutes: the stack has as long as the progress line to be ready.
  const stack = await launch(
    'npm',
    { ZHONGSHU_TOOLS_DIR: toolsDir, ZH_PROGRESS_INTERVAL_MS: '1000' },
    '/bin/sh',
    300_000
  );
  // What was on screen when the first progress line came (or the stack was ready without one): the binary must not
  // exist yet then, i.e. the line was shown while the build ran.
  const progress = await eventually(
    async () => {
      const line = /\[stack\] building ferretdb (v[\d.]+): \d+:\d\d of about \d+:\d\d, \d+ of ~\d+ packages, .+/.exec(
        stack.output()
      );
      if (line)
        return {
          line: line[0],
          version: line[1]!,
          built: fs.existsSync(path.join(toolsDir, `ferretdb-${line[1]}`, 'ferretdb'))
        };
      return /ready in/.test(stack.output()) ? { line: null, version: '', built: true } : undefined;
    },
    300_000,
    'a progress line'
  );
  expect(progress.line).not.toBeNull();
  expect(progress.built).toBe(false);
  await stack.ready;
  Object.values(recordedPids(stack.dataDir)).forEach((p) => seen.add(p));

  const out = stack.output();
  const announced = out.indexOf(
    `ferretdb ${progress.version} is not built yet: building FerretDB with Go now, once (about `
  );
  expect(announced).toBeGreaterThanOrEqual(0);
  expect(out.indexOf(progress.line!)).toBeGreaterThan(announced);
  expect(out).toMatch(
    new RegExp(
      `\\[stack\\] built ferretdb ${progress.version} in \\d+:\\d\\d \\(\\d+ packages\\) -> ${toolsDir}/ferretdb-`
    )
  );
  // The Temporal CLI was there already: nothing said about building it.
  expect(out).not.toMatch(/temporal v[\d.]+ is not built yet/);

  process.kill(-stack.child.pid!, 'SIGINT');
  await stack.exited;
  expect([...seen].filter(alive)).toEqual([]);
}, 360_000);
