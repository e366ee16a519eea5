import http from 'node:http';
import https from 'node:https';
import { TransientError } from '../errors';
import { parsePrometheusText, type PrometheusSample } from './prometheus-text';

export interface ScrapeOptions {
  /** Whole request limit, ms. Default 5000. */
  timeoutMs?: number;
  headers?: http.OutgoingHttpHeaders;
}

/** Largest `/metrics` body read (vLLM's is tens of kB; a runaway proxy page must not fill memory). */
const longestBody = 16 * 1024 * 1024;

/** GETs a Prometheus endpoint and parses it; TransientError `METRICS_SCRAPE_FAILED` on any failure. */
export function scrapePrometheus(url: string, options: ScrapeOptions = {}): Promise<PrometheusSample[]> {
  const timeoutMs = options.timeoutMs ?? 5000;
  return new Promise((resolve, reject) => {
    const fail = (reason: string, cause?: unknown) =>
      reject(new TransientError('METRICS_SCRAPE_FAILED', `could not read ${url}: ${reason}`, { cause }));
    let target: URL;
    try {
      target = new URL(url);
    } catch (error) {
      fail('not a URL', error);
      return;
    }
    const request = (target.protocol === 'https:' ? https : http).get(
      target,
      { headers: { accept: 'text/plain', ...options.headers } },
      (response) => {
        const pieces: Buffer[] = [];
        let bytes = 0;
        response.on('data', (piece: Buffer) => {
          bytes += piece.length;
          if (bytes > longestBody) {
            request.destroy();
            fail(`the body exceeds ${longestBody} bytes`);
            return;
          }
          pieces.push(piece);
        });
        response.on('end', () => {
          clearTimeout(timer);
          if (response.statusCode !== 200) {
            fail(`HTTP ${response.statusCode ?? 0}`);
            return;
          }
          try {
            resolve(parsePrometheusText(Buffer.concat(pieces).toString('utf8'), url));
          } catch (error) {
            fail((error as Error).message, error);
          }
        });
        response.on('error', (error) => fail(error.message, error));
      },
    );
    const timer = setTimeout(() => {
      request.destroy();
      fail(`no complete answer within ${timeoutMs} ms`);
    }, timeoutMs);
    request.on('error', (error) => {
      clearTimeout(timer);
      fail(error.message, error);
    });
  });
}
