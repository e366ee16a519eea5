import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Job } from 'bullmq';
import type { Command } from 'commander';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { HatEnv } from '../../shared/config/env';
import { redactUrlCredentials, redactUrlCredentialsIn } from '../../shared/config/url-credentials';
import { validateObjectKey } from '../../shared/artifacts/object-key';
import { BadInputError, errorCodeOf } from '../../shared/errors';
import type { Logger } from '../../shared/log/logger';
import { openQueueContext, type QueueContext } from '../../queues/bullmq/queue-context';
import { runsQueueName } from '../../queues/stage-kit/stage-names';
import { createStoreCache, type StoreCache } from '../../queues/bullmq/stage-runtime';
import { stageNames } from '../../queues/stage-kit/stage-registry';
import { registerCatalogStages } from '../../workers/stage-catalog';
import type { CliContext } from '../cli-context';
import { portNumber } from '../command-support';
import type { RegisterCommand } from './index';
import { nextShutdownSignal } from './worker';

/** Cookie that carries the session after a `?token=` login (a value derived from the token, not the token). */
export const dashboardCookieName = 'hat_dashboard_session';

/** Shortest token accepted: a guessable token guards nothing. */
const minimumTokenLength = 16;

export interface DashboardOptions {
  env: HatEnv;
  /** 0 picks a free port (tests). */
  port: number;
  /** Default `127.0.0.1`. */
  host?: string;
  /** Bearer token; required unless `insecureNoAuth`. */
  token?: string;
  /** Serve without authentication (only behind something that authenticates). */
  insecureNoAuth?: boolean;
  /** No retry/remove/clean/pause buttons. */
  readOnly?: boolean;
  logger?: Logger;
}

export interface Dashboard {
  readonly port: number;
  /** `http://<host>:<port>/` (without the token). */
  readonly url: string;
  /** Queues shown: every registered stage, then `runs`. */
  readonly queues: string[];
  close(): Promise<void>;
}

/**
 * bull-board's BullMQ adapter showing every job with URL secrets redacted: data, result, failure
 * reason, stack trace and log lines. Nothing new reaches Redis with one (every edge refuses them),
 * but a job written before must not show its key to whoever opens the board.
 */
class RedactingQueueAdapter extends BullMQAdapter {
  override async getJob(id: string): Promise<Job | undefined> {
    const job = await super.getJob(id);
    return job && shownRedacted(job);
  }

  override async getJobs(...range: Parameters<BullMQAdapter['getJobs']>): Promise<Job[]> {
    return (await super.getJobs(...range)).map((job) => job && shownRedacted(job));
  }

  override async getJobLogs(id: string): Promise<string[]> {
    return (await super.getJobLogs(id)).map(redactUrlCredentials);
  }
}

/** The job, whose JSON form (all bull-board reads to show it) is redacted; its actions stay its own. */
function shownRedacted(job: Job): Job {
  const toJSON = job.toJSON.bind(job);
  // Not enumerable: BullMQ's toJSON copies the job's own enumerable fields.
  return Object.defineProperty(job, 'toJSON', { value: () => redactUrlCredentialsIn(toJSON()) });
}

/**
 * The queue dashboard (bull-board) over every stage queue and `runs`, behind a bearer token.
 * A request passes with `Authorization: Bearer <token>`, or with the session cookie set after
 * opening any page once with `?token=<token>` (then redirected to the same page without it, so
 * the token leaves the address bar and history). Everything else gets 401.
 */
export async function startDashboard(options: DashboardOptions): Promise<Dashboard> {
  const token = options.token;
  if (!options.insecureNoAuth) {
    if (token === undefined || token.trim() === '') {
      throw new BadInputError(
        'DASHBOARD_TOKEN_MISSING',
        'hat dashboard needs a token: give --token <t> or set HAT_DASHBOARD_TOKEN (e.g. `openssl rand -hex 32`); --insecure-no-auth serves it to anyone who can reach the port',
      );
    }
    if (token.length < minimumTokenLength) {
      throw new BadInputError(
        'DASHBOARD_TOKEN_WEAK',
        `--token must be at least ${minimumTokenLength} characters (e.g. \`openssl rand -hex 32\`)`,
      );
    }
    // A header's value is trimmed before it is compared, so such a token could never match; and
    // blanks in a secret are usually a paste gone wrong.
    if (/\s/.test(token)) {
      throw new BadInputError(
        'DASHBOARD_TOKEN_WEAK',
        '--token must not contain spaces or other whitespace (e.g. `openssl rand -hex 32`)',
      );
    }
  }
  registerCatalogStages();
  const stores = createStoreCache(options.env);
  // A worker-role connection rides out Redis restarts: the dashboard is long-lived.
  const context = await openQueueContext(options.env, { role: 'worker', connectionName: 'hat-dashboard' });
  const queues = [...stageNames(), runsQueueName];
  try {
    const serverAdapter = new ExpressAdapter();
    serverAdapter.setBasePath('/');
    createBullBoard({
      queues: queues.map(
        (name) =>
          new RedactingQueueAdapter(context.queue(name), {
            readOnlyMode: options.readOnly ?? false,
            allowRetries: !(options.readOnly ?? false),
          }),
      ),
      // @bull-board/express 9.10.1 (the newest) nests its own @bull-board/api 9.10.1 beside our
      // 9.10.2: the adapter interface is the same, only the private fields differ in the types.
      serverAdapter: serverAdapter as unknown as Parameters<typeof createBullBoard>[0]['serverAdapter'],
      options: { uiConfig: { boardTitle: `hat queues (${context.prefix})` } },
    });
    const app = express();
    app.disable('x-powered-by');
    app.use(sameOriginOnly);
    if (!options.insecureNoAuth) app.use(requireToken(token as string));
    app.get('/runs/:runId/{*path}', serveRunObject(context, options.env, stores));
    app.use('/', withoutOutsideRequests, serverAdapter.getRouter());
    // Loopback unless told otherwise: a queue dashboard can retry and remove jobs.
    const listenHost = options.host ?? '127.0.0.1';
    const server = await listen(app, options.port, listenHost);
    const port = (server.address() as AddressInfo).port;
    const host =
      listenHost === '0.0.0.0' || listenHost === '::'
        ? '127.0.0.1'
        : listenHost.includes(':')
          ? `[${listenHost}]`
          : listenHost;
    return {
      port,
      url: `http://${host}:${port}/`,
      queues,
      async close() {
        await new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        });
        await context.close();
        await stores.close();
      },
    };
  } catch (error) {
    await context.close();
    throw error;
  }
}

/**
 * A stylesheet or script the page would load from another host: bull-board's page links Google
 * Fonts, which tells an outside host who opens the dashboard and fails on machines without internet
 * access. The page falls back to the system fonts.
 */
const outsideResource =
  /<link\b[^>]*\bhref\s*=\s*["']?(?:https?:)?\/\/[^>]*>|<script\b[^>]*\bsrc\s*=\s*["']?(?:https?:)?\/\/[^>]*>\s*<\/script>/gi;

/**
 * What the browser may load for any page of the dashboard (the board, its API, run reports): only
 * its own origin, inline code and data/blob URLs. It blocks every request to another host, whatever
 * a bull-board version or a report might add, without restricting what the page does itself.
 */
const dashboardContentSecurityPolicy =
  "default-src 'self' 'unsafe-inline' 'unsafe-eval' data: blob:; base-uri 'self'; form-action 'self'";

function sameOriginOnly(_request: Request, response: Response, next: NextFunction): void {
  response.setHeader('content-security-policy', dashboardContentSecurityPolicy);
  next();
}

/** The page's HTML without what it would load from another host. */
export function withoutOutsideResources(html: string): string {
  return html.replace(outsideResource, '');
}

/** bull-board renders its page with `res.render`; the rendered HTML is sent without outside resources. */
function withoutOutsideRequests(_request: Request, response: Response, next: NextFunction): void {
  const render = response.render.bind(response);
  response.render = (view: string, options?: object) =>
    render(view, options ?? {}, (error: Error | null, html?: string) =>
      error ? next(error) : void response.send(withoutOutsideResources(html ?? '')),
    );
  next();
}

const contentTypes: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  json: 'application/json',
  svg: 'image/svg+xml',
  csv: 'text/csv; charset=utf-8',
  md: 'text/markdown; charset=utf-8',
  txt: 'text/plain; charset=utf-8',
  gz: 'application/gzip',
  parquet: 'application/vnd.apache.parquet',
};

/**
 * `GET /runs/<runId>/<key>`: an object of a run (its run report, each stage's report, stats,
 * charts) from the run's own artifact root, behind the dashboard's token. The run report links its
 * stage reports relative to its folder, so they open from here as they do from a local copy.
 */
function serveRunObject(context: QueueContext, env: HatEnv, stores: StoreCache) {
  return async (request: Request, response: Response, next: NextFunction) => {
    try {
      const runId = String(request.params.runId);
      const rest = (request.params as { path?: string | string[] }).path;
      const path = Array.isArray(rest) ? rest.join('/') : (rest ?? '');
      const run = await context.runsQueue.getJob(runId);
      const root = (run?.data as { artifactsRoot?: string } | undefined)?.artifactsRoot ?? env.HAT_ARTIFACTS;
      if (!run || !root) return void response.status(404).type('text/plain').send(`no run ${runId} in this prefix\n`);
      const key = validateObjectKey(`runs/${runId}/${path || 'run-report.html'}`);
      const store = stores.storeFor(root);
      const body = await store
        .getBuffer(key)
        .catch((error: unknown) => (errorCodeOf(error) === 'ARTIFACT_NOT_FOUND' ? undefined : Promise.reject(error)));
      if (!body)
        return void response
          .status(404)
          .type('text/plain')
          .send(`${store.uriOf(key)} does not exist\n`);
      const extension = key.slice(key.lastIndexOf('.') + 1);
      response.type(contentTypes[extension] ?? 'application/octet-stream').send(body);
    } catch (error) {
      if (errorCodeOf(error) === 'BAD_OBJECT_KEY')
        return void response
          .status(400)
          .type('text/plain')
          .send(`${(error as Error).message}\n`);
      next(error);
    }
  };
}

function listen(app: express.Express, port: number, host: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = app.listen(port, host);
    const onError = (error: NodeJS.ErrnoException) =>
      reject(
        error.code === 'EADDRINUSE' || error.code === 'EACCES'
          ? new BadInputError(
              'DASHBOARD_PORT_UNAVAILABLE',
              `--port ${port}: cannot listen on ${host}:${port} (${error.code}); pick a free port`,
            )
          : error,
      );
    server.once('error', onError);
    server.once('listening', () => {
      server.off('error', onError);
      resolve(server);
    });
  });
}

/** Equal-time comparison of two strings (digests first, so lengths do not leak). */
function sameSecret(given: string, expected: string): boolean {
  const digest = (value: string) => createHmac('sha256', 'hat-dashboard-compare').update(value).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

function cookieValue(request: Request, name: string): string | undefined {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const [key, ...rest] = part.trim().split('=');
    if (key === name) return decodeURIComponent(rest.join('='));
  }
  return undefined;
}

function requireToken(token: string) {
  // The cookie holds a value derived from the token: a copied cookie works only for this token,
  // and the token itself is never stored in the browser.
  const session = createHmac('sha256', token).update('hat-dashboard-session').digest('hex');
  return (request: Request, response: Response, next: NextFunction) => {
    const header = request.headers.authorization;
    if (header?.startsWith('Bearer ') && sameSecret(header.slice('Bearer '.length).trim(), token)) return next();
    const cookie = cookieValue(request, dashboardCookieName);
    if (cookie !== undefined && sameSecret(cookie, session)) return next();
    const url = new URL(request.originalUrl, 'http://dashboard');
    const queryToken = url.searchParams.get('token');
    if (queryToken !== null && sameSecret(queryToken, token)) {
      url.searchParams.delete('token');
      const secure = request.secure || request.headers['x-forwarded-proto'] === 'https';
      response.setHeader(
        'Set-Cookie',
        `${dashboardCookieName}=${session}; Path=/; HttpOnly; SameSite=Strict; Max-Age=43200${secure ? '; Secure' : ''}`,
      );
      response.redirect(303, `${url.pathname}${url.search}`);
      return;
    }
    response
      .status(401)
      .set('WWW-Authenticate', 'Bearer realm="hat dashboard"')
      .type('text/plain')
      .send('401 Unauthorized: send Authorization: Bearer <token>, or open this page once with ?token=<token>\n');
  };
}

interface DashboardCommandOptions {
  port: number;
  host: string;
  token?: string;
  insecureNoAuth?: boolean;
  readOnly?: boolean;
}

/** `hat dashboard [--port 3000] [--token <t> | HAT_DASHBOARD_TOKEN]`: serves until SIGTERM/SIGINT. */
export const registerDashboardCommand: RegisterCommand = (program: Command, context: CliContext) => {
  program
    .command('dashboard')
    .description('queue dashboard (bull-board) over every stage queue and runs, behind a bearer token')
    .option('--port <port>', 'port to listen on', portNumber, 3000)
    .option('--host <host>', 'address to listen on (0.0.0.0: every interface, as in a container)', '127.0.0.1')
    .option('--token <token>', 'bearer token (default HAT_DASHBOARD_TOKEN); open /?token=<token> once in a browser')
    .option('--insecure-no-auth', 'serve without a token (only behind a proxy that authenticates)')
    .option('--read-only', 'hide retry, remove, clean and pause actions')
    .action(async (options: DashboardCommandOptions) => {
      const dashboard = await startDashboard({
        env: context.env,
        port: options.port,
        host: options.host,
        token: options.token ?? context.env.HAT_DASHBOARD_TOKEN,
        insecureNoAuth: options.insecureNoAuth,
        readOnly: options.readOnly,
        logger: context.logger,
      });
      const shutdown = nextShutdownSignal();
      if (options.insecureNoAuth) context.logger.warn('dashboard serves without authentication (--insecure-no-auth)');
      context.logger.info(
        { url: dashboard.url, queues: dashboard.queues, prefix: context.env.HAT_REDIS_PREFIX },
        'dashboard ready',
      );
      context.print(
        `dashboard: ${dashboard.url} (open ${dashboard.url}?token=<token> once, or send Authorization: Bearer <token>)`,
      );
      const signal = await shutdown;
      context.logger.info({ signal }, 'dashboard shutting down');
      await dashboard.close();
    });
};
