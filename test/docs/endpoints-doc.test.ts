/**
 * docs/endpoints.md is generated from the route registry (npm run docs:endpoints): it fails here when the committed
 * page differs from what the routes declare, or from the directory a running service serves at GET /a2a/endpoints.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { EndpointGroup } from '../../core/endpoint-groups';
import { DocumentedEndpoint, ENDPOINTS_DOC, renderEndpointsDoc } from '../../scripts/docs/endpoints';
import { http, startTestService, TestService } from '../support/service';

const STALE = 'docs/endpoints.md is stale: run `npm run docs:endpoints` and commit it';
const committed = () => (fs.existsSync(ENDPOINTS_DOC) ? fs.readFileSync(ENDPOINTS_DOC, 'utf8') : '');

function expectCommitted(generated: string, why: string): void {
  const a = committed().split('\n');
  const b = generated.split('\n');
  const line = a.findIndex((text, i) => text !== b[i]);
  if (line !== -1 || a.length !== b.length) {
    const at = line === -1 ? Math.min(a.length, b.length) : line;
    throw new Error(
      `${STALE} (${why}; line ${at + 1}:\n  committed: ${a[at] ?? '(end of file)'}\n  expected:  ${b[at] ?? '(end of file)'})`
    );
  }
}

describe('docs/endpoints.md', () => {
  it('is what npm run docs:endpoints writes from the route registry', () => {
    // In a process of its own, as npm runs it: building the listeners loads ESM-only modules jest cannot require.
    const generated = execFileSync(process.execPath, ['--import', 'tsx', 'scripts/docs/endpoints.ts', '--stdout'], {
      cwd: path.resolve(__dirname, '..', '..'),
      encoding: 'utf8',
      timeout: 60_000
    });
    expectCommitted(generated, 'the route registry differs');
  });

  describe('against a running service', () => {
    let svc: TestService;
    beforeAll(async () => {
      svc = await startTestService({}, { worker: false });
    });
    afterAll(async () => {
      await svc?.close();
    });

    it('lists exactly the endpoints GET /a2a/endpoints serves', async () => {
      const res = await http('GET', `${svc.urls.main}/a2a/endpoints`);
      expect(res.status).toBe(200);
      const served = (
        res.body.endpoints as (Omit<DocumentedEndpoint, 'listener' | 'group'> & { group: string; url: string })[]
      ).map(({ url, group, ...e }) => ({
        ...e,
        group: group as EndpointGroup,
        listener: url === `${svc.env.HUB_PUBLIC_URL}${e.path}` ? 'hub' : 'main'
      }));
      expect(served.length).toBe(res.body.total);
      expectCommitted(renderEndpointsDoc(served), 'the served directory differs');
    });
  });
});
