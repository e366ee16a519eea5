import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BadInputError } from '../errors';
import type { Logger } from '../log/logger';

/** What the server exposes: the exposition text and its content type. */
export interface MetricsSource {
  render(): Promise<string>;
  readonly contentType: string;
}

export interface MetricsServerOptions {
  /** 0 picks a free port (tests). */
  port: number;
  /** Default `127.0.0.1`; `0.0.0.0` where Prometheus scrapes the pod's or container's address. */
  host?: string;
  logger?: Logger;
}

export interface MetricsServer {
  readonly port: number;
  /** `http://<host>:<port>/metrics`. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Serves `GET /metrics` (Prometheus text format) on its own port with node:http: a scrape must
 * not depend on anything else the process does, and there is nothing else to route.
 */
export async function startMetricsServer(source: MetricsSource, options: MetricsServerOptions): Promise<MetricsServer> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (path !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found; metrics are at /metrics\n');
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('use GET\n');
      return;
    }
    source.render().then(
      (text) =>
        response
          .writeHead(200, { 'content-type': source.contentType })
          .end(request.method === 'HEAD' ? undefined : text),
      (error: unknown) => {
        options.logger?.error({ err: error }, 'cannot render metrics');
        response.writeHead(500, { 'content-type': 'text/plain' }).end('cannot render metrics\n');
      },
    );
  });
  // Scrapers keep connections alive; closing must not wait for them.
  server.keepAliveTimeout = 5_000;
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => {
      reject(
        error.code === 'EADDRINUSE' || error.code === 'EACCES'
          ? new BadInputError(
              'METRICS_PORT_UNAVAILABLE',
              `--metrics-port ${options.port}: cannot listen on ${host}:${options.port} (${error.code}); pick a free port`,
            )
          : error,
      );
    };
    server.once('error', onError);
    server.listen(options.port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
