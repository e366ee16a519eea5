import { dashboardCookieName, startDashboard, type Dashboard } from '../cli/commands/dashboard';
import { stageNames } from '../queues/stage-kit/stage-registry';
import { enqueueRun } from '../queues/runs/flows';
import { planRun } from '../queues/runs/run-config';
import { watchRun } from '../queues/runs/run-control';
import { runHatInProcess } from './support/hat-in-process';
import { freePort } from './support/free-port';
import { createQueueTestKit, type QueueTestKit } from './support/queue-test-kit';

/** `hat dashboard`: bull-board over every stage queue and runs, behind a bearer token. */

const token = 'dashboard-test-token-0123456789abcdef';

interface QueuesResponse {
  queues: { name: string; counts: Record<string, number> }[];
}

describe('hat dashboard', () => {
  let kit: QueueTestKit;
  let dashboard: Dashboard | undefined;
  beforeEach(async () => {
    kit = await createQueueTestKit();
  });
  afterEach(async () => {
    await dashboard?.close();
    dashboard = undefined;
    await kit.cleanup();
  });

  const bearer = { authorization: `Bearer ${token}` };

  it('answers 401 without the token and serves the board and its API with it', async () => {
    dashboard = await startDashboard({ env: kit.env, port: 0, host: '127.0.0.1', token });
    await kit.context.queue('fanout-demo').add('probe', { note: 'seen by the dashboard' }, { jobId: 'probe' });

    const refused = await fetch(dashboard.url);
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toContain('Bearer');
    expect((await fetch(`${dashboard.url}api/queues`)).status).toBe(401);
    expect(
      (await fetch(`${dashboard.url}api/queues`, { headers: { authorization: 'Bearer not-the-token-at-all-000000' } }))
        .status,
    ).toBe(401);
    expect(
      (await fetch(`${dashboard.url}api/queues`, { headers: { cookie: `${dashboardCookieName}=${token}` } })).status,
    ).toBe(401);

    const page = await fetch(dashboard.url, { headers: bearer });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');

    const api = await fetch(`${dashboard.url}api/queues`, { headers: bearer });
    expect(api.status).toBe(200);
    const body = (await api.json()) as QueuesResponse;
    expect(body.queues.map((queue) => queue.name).sort()).toEqual([...stageNames(), 'runs'].sort());
    expect(body.queues.find((queue) => queue.name === 'fanout-demo')?.counts.waiting).toBe(1);
    expect(dashboard.queues).toContain('collect');
  });

  it('serves a page that loads nothing from another host (no Google Fonts), with its own scripts and styles', async () => {
    dashboard = await startDashboard({ env: kit.env, port: 0, host: '127.0.0.1', token });
    const html = await (await fetch(dashboard.url, { headers: bearer })).text();
    expect(html).toMatch(/<script[^>]+src="static\/js\/main\.[0-9a-f]+\.js"/);
    const stylesheets = [...html.matchAll(/<link[^>]+href="([^"]+\.css)"/g)].map((match) => match[1]);
    expect(stylesheets.length).toBeGreaterThan(0);
    const ownHost = new URL(dashboard.url).host;
    const outsideHosts = (text: string) =>
      [...text.matchAll(/(?:https?:)?\/\/[a-z0-9.-]+(?::\d+)?/gi)]
        .map((match) => new URL(match[0], dashboard!.url).host)
        .filter((host) => host !== ownHost && host !== 'www.w3.org');
    expect(outsideHosts(html)).toEqual([]);
    for (const stylesheet of stylesheets) {
      const response = await fetch(new URL(stylesheet, dashboard.url), { headers: bearer });
      expect(response.status).toBe(200);
      expect(outsideHosts(await response.text())).toEqual([]);
    }
  });

  it('tells the browser to load nothing from another host: every response carries a policy allowing only its own origin', async () => {
    dashboard = await startDashboard({ env: kit.env, port: 0, host: '127.0.0.1', token });
    const html = await (await fetch(dashboard.url, { headers: bearer })).text();
    const script = /<script[^>]+src="(static\/js\/main\.[0-9a-f]+\.js)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    const responses = await Promise.all([
      fetch(dashboard.url, { headers: bearer }),
      fetch(new URL(script as string, dashboard.url), { headers: bearer }),
      fetch(`${dashboard.url}api/queues`, { headers: bearer }),
      fetch(`${dashboard.url}runs/no-such-run/run-report.html`, { headers: bearer }),
      fetch(dashboard.url),
    ]);
    for (const response of responses) {
      const policy = response.headers.get('content-security-policy') ?? '';
      const directives = new Map(
        policy
          .split(';')
          .map((directive) => directive.trim().split(/\s+/))
          .filter((words) => words[0] !== '')
          .map(([name, ...sources]) => [name, sources]),
      );
      expect([response.url, directives.get('default-src')?.[0]]).toEqual([response.url, "'self'"]);
      // Sources are keywords and schemes of the page itself, never a host.
      const sources = [...directives.values()].flat();
      expect(sources.filter((source) => !/^('[a-z-]+'|data:|blob:)$/.test(source))).toEqual([]);
    }
  });

  it('trades ?token= for a session cookie once, then drops the token from the address', async () => {
    dashboard = await startDashboard({ env: kit.env, port: 0, host: '127.0.0.1', token });
    const login = await fetch(`${dashboard.url}?token=${token}&tab=failed`, { redirect: 'manual' });
    expect(login.status).toBe(303);
    expect(login.headers.get('location')).toBe('/?tab=failed');
    const setCookie = login.headers.get('set-cookie') ?? '';
    expect(setCookie).toContain('HttpOnly');
    expect(setCookie).toContain('SameSite=Strict');
    expect(setCookie).not.toContain(token);
    const cookie = setCookie.split(';')[0];

    expect((await fetch(dashboard.url, { headers: { cookie } })).status).toBe(200);
    expect((await fetch(`${dashboard.url}api/queues`, { headers: { cookie } })).status).toBe(200);
    expect((await fetch(`${dashboard.url}?token=wrong-token-wrong-token-wrong`, { redirect: 'manual' })).status).toBe(
      401,
    );
  });

  it('refuses to start without a token unless --insecure-no-auth is given', async () => {
    await expect(startDashboard({ env: kit.env, port: 0 })).rejects.toThrow(
      /\[DASHBOARD_TOKEN_MISSING\].*HAT_DASHBOARD_TOKEN/,
    );
    await expect(startDashboard({ env: kit.env, port: 0, token: 'short' })).rejects.toThrow(/\[DASHBOARD_TOKEN_WEAK\]/);

    const environment = { ...process.env, HAT_REDIS_PREFIX: kit.prefix, HAT_DASHBOARD_TOKEN: undefined };
    const cli = await runHatInProcess(environment, 'dashboard', '--port', String(await freePort()));
    expect(cli.code).toBe(2);
    expect(cli.stderr).toMatch(/--token <t> or set HAT_DASHBOARD_TOKEN/);

    dashboard = await startDashboard({ env: kit.env, port: 0, host: '127.0.0.1', insecureNoAuth: true });
    expect((await fetch(`${dashboard.url}api/queues`)).status).toBe(200);
  });

  it('listens on loopback by default and refuses a blank or whitespace token (issue #20)', async () => {
    await expect(startDashboard({ env: kit.env, port: 0, token: ' '.repeat(16) })).rejects.toThrow(
      /\[DASHBOARD_TOKEN_MISSING\]/,
    );
    await expect(startDashboard({ env: kit.env, port: 0, token: `${token} ` })).rejects.toThrow(
      /\[DASHBOARD_TOKEN_WEAK\].*whitespace/,
    );
    dashboard = await startDashboard({ env: kit.env, port: 0, token });
    expect(dashboard.url).toBe(`http://127.0.0.1:${dashboard.port}/`);
    // Not reachable on another local address of this machine: it is bound to 127.0.0.1 only.
    const { networkInterfaces } = await import('node:os');
    const other = Object.values(networkInterfaces())
      .flat()
      .find((address) => address && address.family === 'IPv4' && !address.internal);
    const loopbackAlias = await fetch(`http://127.0.0.2:${dashboard.port}/api/queues`, { headers: bearer }).then(
      () => 'answered',
      () => 'refused',
    );
    expect(loopbackAlias).toBe('refused');
    if (other) {
      const outside = await fetch(`http://${other.address}:${dashboard.port}/api/queues`, { headers: bearer }).then(
        () => 'answered',
        () => 'refused',
      );
      expect(outside).toBe('refused');
    }
    expect((await fetch(`${dashboard.url}api/queues`, { headers: bearer })).status).toBe(200);
  });

  it("serves a run's report and its stage objects behind the token (issue #20)", async () => {
    await kit.startWorkers({ queues: ['fanout-demo', 'runs'] });
    await enqueueRun(
      kit.context,
      planRun({ runId: 'served', stages: { 'fanout-demo': { parts: 2 } } }, { env: kit.env, now: new Date() }),
    );
    expect((await watchRun(kit.context, 'served', { intervalMs: 100 })).state).toBe('completed');
    dashboard = await startDashboard({ env: kit.env, port: 0, token });

    expect((await fetch(`${dashboard.url}runs/served/run-report.html`)).status).toBe(401);
    const report = await fetch(`${dashboard.url}runs/served/run-report.html`, { headers: bearer });
    expect(report.status).toBe(200);
    expect(report.headers.get('content-type')).toContain('text/html');
    expect(await report.text()).toContain('Run <code>served</code>');
    const manifest = await fetch(`${dashboard.url}runs/served/fanout-demo/manifest.json`, { headers: bearer });
    expect(manifest.status).toBe(200);
    expect(((await manifest.json()) as { objects: unknown[] }).objects).toHaveLength(2);
    expect((await fetch(`${dashboard.url}runs/served/no-such-report.html`, { headers: bearer })).status).toBe(404);
    expect((await fetch(`${dashboard.url}runs/no-such-run/run-report.html`, { headers: bearer })).status).toBe(404);
  });
});
