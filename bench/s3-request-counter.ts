import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An HTTP proxy in front of an S3-compatible server that counts the requests passing through it,
 * by kind and by whatever label `labelOf()` gives at the time (the load bench's run phase). The
 * counts are what a bucket would bill and rate-limit: every PUT, multipart call, GET, HEAD,
 * LIST and DELETE the workers and the CLI send, retries included.
 */

export type S3RequestKind = 'put' | 'multipart' | 'get' | 'head' | 'list' | 'delete' | 'other';

export const s3RequestKinds: readonly S3RequestKind[] = ['put', 'multipart', 'get', 'head', 'list', 'delete', 'other'];

export interface S3RequestCounter {
  /** `http://127.0.0.1:<port>`: pass as S3_ENDPOINT. */
  endpoint: string;
  /** Counts per label, per kind. */
  counts: Map<string, Record<S3RequestKind, number>>;
  close(): Promise<void>;
}

/** What an S3 request is, from its method and query (path-style addressing). */
export function s3RequestKind(method: string, url: string): S3RequestKind {
  const query = new URL(url, 'http://proxy').searchParams;
  if (query.has('uploadId') || query.has('uploads')) return 'multipart';
  if (method === 'PUT') return 'put';
  if (method === 'HEAD') return 'head';
  if (method === 'DELETE') return 'delete';
  if (method === 'POST' && query.has('delete')) return 'delete';
  if (method === 'GET') return query.has('list-type') || url.split('?')[0].split('/').length <= 2 ? 'list' : 'get';
  return 'other';
}

/** Starts the proxy on a free loopback port in front of `upstream` (an http:// endpoint). */
export async function startS3RequestCounter(upstream: string, labelOf: () => string): Promise<S3RequestCounter> {
  const target = new URL(upstream);
  const counts = new Map<string, Record<S3RequestKind, number>>();
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const server = http.createServer((request, response) => {
    const label = labelOf();
    const row =
      counts.get(label) ??
      (Object.fromEntries(s3RequestKinds.map((kind) => [kind, 0])) as Record<S3RequestKind, number>);
    counts.set(label, row);
    row[s3RequestKind(request.method ?? 'GET', request.url ?? '/')]++;
    // The Host header goes on unchanged: the client signed the proxy's address.
    const forward = http.request(
      {
        host: target.hostname,
        port: target.port,
        method: request.method,
        path: request.url,
        headers: request.headers,
        agent,
      },
      (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      },
    );
    forward.on('error', () => response.destroy());
    request.pipe(forward);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    counts,
    close: () =>
      new Promise<void>((resolve) => {
        agent.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
