/**
 * The join portal in a real browser: Debian's chromium driven by playwright-core, against the real service.
 * The page renders the five quick-start steps and the live online count, and its form registers a node.
 */
import fs from 'node:fs';
import { Browser, chromium } from 'playwright-core';
import { heartbeat, registerNode } from '../support/federation';
import { issueHomologousToken } from '../support/credentials';
import { http, startTestService, TestService } from '../support/service';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
let svc: TestService;
let browser: Browser;

beforeAll(async () => {
  if (!fs.existsSync(CHROMIUM))
    throw new Error(
      `${CHROMIUM} not found: install Debian's chromium package (apt-get install chromium), as .ci/run does`
    );
  svc = await startTestService({ NODE_OFFLINE_AFTER_S: '60' });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync'
    ] // playwright gives each launch a fresh profile
  });
});
afterAll(async () => {
  await browser?.close();
  await svc?.close();
});

describe('join portal', () => {
  it('renders the federation, five steps and the live online count', async () => {
    const reviewer = await issueHomologousToken(svc.urls.main, svc.adminToken);
    const online = await registerNode(svc.urls.main, 'already-online');
    await heartbeat(svc.urls.main, online);
    await http('POST', `${svc.urls.main}/a2a/review/approve`, {
      headers: { 'x-zr-token': reviewer },
      body: { node_id: online.node_id, reason: 'ok' }
    });

    const page = await browser.newPage();
    const response = await page.goto(`${svc.urls.main}/a2a/join/`);
    expect(response!.status()).toBe(200);
    expect(await page.locator('h1').textContent()).toContain('Join');
    expect(await page.locator('#quick-start li').count()).toBe(5);
    expect(await page.locator('#quick-start li').first().textContent()).toContain('/a2a/.well-known/agent.json');
    // A locator waits without evaluating script text in the page: the page's CSP forbids eval, which a string
    // predicate needs once it has to poll (the count is filled in by the page's own request).
    await page.locator('#online-count', { hasText: /^1$/ }).waitFor({ timeout: 15_000 });
    await page.close();
  });

  it('registers a node through the form and shows its id and key once', async () => {
    const page = await browser.newPage();
    await page.goto(`${svc.urls.main}/a2a/join/`);
    await page.fill('#name', 'browser-node');
    await page.selectOption('#brand', 'deepseek');
    await page.fill('#model_base', 'deepseek-v3');
    await page.fill('#memory_gb', '32');
    await page.fill('#capabilities', 'chat, code');
    await page.click('#register-button');
    await page.waitForSelector('#node-id');
    const nodeId = (await page.locator('#node-id').textContent())!;
    const apiKey = (await page.locator('#api-key').textContent())!;
    expect(nodeId).toMatch(/^ext-deepseek-\d{6}$/);

    const listed = await http('GET', `${svc.urls.main}/a2a/nodes/${nodeId}`);
    expect(listed.body.node).toMatchObject({
      name: 'browser-node',
      brand: { code: 'deepseek', model_base: 'deepseek-v3' },
      instance: { memory_gb: 32 },
      capabilities: ['chat', 'code'],
      state: 'pending_review'
    });
    expect((await heartbeat(svc.urls.main, { node_id: nodeId, api_key: apiKey })).status).toBe(200);

    // A bad submission shows the error instead.
    await page.fill('#name', ' ');
    await page.click('#register-button');
    await page.waitForSelector('#result.error');
    expect(await page.locator('#result').textContent()).toContain('name');
    await page.close();
  });
});
