import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Rng } from '../../shared/random/rng';

/**
 * An HTTP proxy in front of an S3-compatible server that injects the faults S3 clients meet in
 * production: 500/503 answers, connections dropped before the request reaches the server or
 * after it was served (the write happened, the client never heard), response bodies cut off
 * half-way, and slow answers. Rules match by method and path; a seeded generator decides each
 * matching request, so a run with the same request order injects the same faults.
 *
 * The Host header is forwarded unchanged: S3 signatures cover it, and the client signed the
 * proxy's address.
 */

export type S3Fault =
  /** An S3-style XML error answer; the request never reaches the server. */
  | { kind: 'status'; status: number; code?: string }
  /** The connection is destroyed before anything is forwarded. */
  | { kind: 'reset-before' }
  /** The request is served upstream (a PUT is stored), then the client's connection is destroyed without an answer. */
  | { kind: 'reset-after' }
  /** Status and headers go out, then half of the body, then the connection is destroyed. */
  | { kind: 'truncate-body' }
  /** The answer is held back this long. */
  | { kind: 'delay'; ms: number };

export interface S3FaultRule {
  /** HTTP methods it applies to. Default: all. */
  methods?: string[];
  /** Tested against `<path>?<query>`. Default: all. */
  path?: RegExp;
  /** Chance per matching request. */
  probability: number;
  fault: S3Fault;
  /** Injected at most this often. Default: unlimited. */
  limit?: number;
  /**
   * The first this many requests that reach the rule get the fault whatever the draw, so a test
   * that needs every kind injected holds whatever order concurrent requests arrive in. Default: 0.
   */
  first?: number;
}

/** A PUT between the proxy and the server: from its first byte to the server's answer (epoch ms). */
export interface PutWindow {
  /** Request path without the query, e.g. `/bucket/prefix/key`. */
  path: string;
  startedAt: number;
  endedAt?: number;
}

export interface InjectedFault {
  method: string;
  url: string;
  kind: S3Fault['kind'];
}

export class S3FaultProxy {
  /** Every fault injected, in order. */
  readonly injected: InjectedFault[] = [];
  /** Requests seen. */
  requests = 0;
  /**
   * Every PUT forwarded to the server. s3rver writes an object in place while it receives it, so
   * a listing taken meanwhile shows it partly written (S3 publishes a PUT atomically); a test
   * tells that apart from a partial object left by the client with these windows.
   */
  readonly puts: PutWindow[] = [];
  private readonly rng: Rng;
  private rules: S3FaultRule[];
  private readonly used = new Map<S3FaultRule, number>();
  private readonly reached = new Map<S3FaultRule, number>();

  private constructor(
    private readonly server: http.Server,
    private readonly target: URL,
    options: { rules: S3FaultRule[]; seed: string },
  ) {
    this.rules = options.rules;
    this.rng = new Rng(options.seed);
  }

  static async start(options: { target: string; rules?: S3FaultRule[]; seed?: string }): Promise<S3FaultProxy> {
    const server = http.createServer();
    const proxy = new S3FaultProxy(server, new URL(options.target), {
      rules: options.rules ?? [],
      seed: options.seed ?? 's3-fault-proxy',
    });
    server.on('request', (request, response) => proxy.handle(request, response));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  /** `http://127.0.0.1:<port>`: give it to clients as S3_ENDPOINT. */
  get endpoint(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  setRules(rules: S3FaultRule[]): void {
    this.rules = rules;
    this.used.clear();
    this.reached.clear();
  }

  /** Faults injected, by kind. */
  counts(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const fault of this.injected) counts[fault.kind] = (counts[fault.kind] ?? 0) + 1;
    return counts;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private choose(method: string, url: string): S3Fault | undefined {
    for (const rule of this.rules) {
      if (rule.methods && !rule.methods.includes(method)) continue;
      if (rule.path && !rule.path.test(url)) continue;
      // Drawn for every matching rule, so one rule's decisions do not shift another's.
      const reached = (this.reached.get(rule) ?? 0) + 1;
      this.reached.set(rule, reached);
      const hit = this.rng.next() < rule.probability || reached <= (rule.first ?? 0);
      if (!hit || (rule.limit !== undefined && (this.used.get(rule) ?? 0) >= rule.limit)) continue;
      this.used.set(rule, (this.used.get(rule) ?? 0) + 1);
      return rule.fault;
    }
    return undefined;
  }

  private handle(request: http.IncomingMessage, response: http.ServerResponse): void {
    this.requests++;
    const method = request.method ?? 'GET';
    const url = request.url ?? '/';
    const fault = this.choose(method, url);
    if (fault) this.injected.push({ method, url, kind: fault.kind });
    const fail = () => {
      request.socket.destroy();
      response.destroy();
    };
    if (fault?.kind === 'reset-before') return fail();
    if (fault?.kind === 'status') {
      request.resume();
      request.on('end', () => {
        const code = fault.code ?? (fault.status === 503 ? 'SlowDown' : 'InternalError');
        response.writeHead(fault.status, { 'content-type': 'application/xml' });
        response.end(
          `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>injected by the fault proxy</Message></Error>`,
        );
      });
      return;
    }
    const window: PutWindow | undefined =
      method === 'PUT' ? { path: url.split('?')[0], startedAt: Date.now() } : undefined;
    if (window) this.puts.push(window);
    const upstream = http.request(
      { host: this.target.hostname, port: this.target.port, method, path: url, headers: request.headers },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.on('end', () => {
          if (window) window.endedAt = Date.now();
          const body = Buffer.concat(chunks);
          const send = () => {
            if (fault?.kind === 'reset-after') return fail();
            if (fault?.kind === 'truncate-body' && body.length > 1) {
              response.writeHead(answer.statusCode ?? 502, answer.headers);
              response.write(body.subarray(0, Math.floor(body.length / 2)), () => setImmediate(fail));
              return;
            }
            response.writeHead(answer.statusCode ?? 502, answer.headers);
            response.end(body);
          };
          if (fault?.kind === 'delay') setTimeout(send, fault.ms);
          else send();
        });
        answer.on('error', fail);
      },
    );
    upstream.on('error', (error) => {
      if (window) window.endedAt = Date.now();
      fail();
      void error;
    });
    request.pipe(upstream);
  }
}
