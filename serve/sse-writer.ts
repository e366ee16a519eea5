import type http from 'node:http';

/** Server-sent events as vLLM writes them: `data: <json>\n\n` per chunk, then `data: [DONE]\n\n`. */
export class SseWriter {
  constructor(private readonly response: http.ServerResponse) {
    response.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    response.flushHeaders();
  }

  send(chunk: unknown): void {
    if (!this.response.destroyed) this.response.write(`data: ${JSON.stringify(chunk)}\n\n`);
  }

  /** An error after the stream started: vLLM sends it as a data event, then `[DONE]`. */
  error(body: unknown): void {
    this.send(body);
    this.done();
  }

  done(): void {
    if (this.response.destroyed) return;
    this.response.write('data: [DONE]\n\n');
    this.response.end();
  }
}
