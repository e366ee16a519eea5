import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { systemClock } from '../model-clock';
import type { EndpointContext } from '../model-errors';
import { chatRequestTarget, runChatAttempt } from './chat-completion-attempt';

const events = [
  {
    id: 'c1',
    object: 'chat.completion.chunk',
    model: 'm',
    choices: [{ index: 0, delta: { role: 'assistant', content: 'In stock' }, finish_reason: null }],
  },
  { id: 'c1', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
  {
    id: 'c1',
    object: 'chat.completion.chunk',
    model: 'm',
    choices: [],
    usage: { prompt_tokens: 12, completion_tokens: 2 },
  },
];

/** A server that sends a whole answer and [DONE], then holds the body open for `holdMs` before ending it. */
async function slowToEndServer(holdMs: number): Promise<{ url: URL; ended: Promise<void>; close(): Promise<void> }> {
  let markEnded = (): void => undefined;
  const ended = new Promise<void>((resolve) => (markEnded = resolve));
  const server = http.createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write(events.map((event) => `data: ${JSON.stringify(event)}\n\n`).join('') + 'data: [DONE]\n\n');
      setTimeout(() => {
        response.end();
        markEnded();
      }, holdMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat/completions`);
  return { url, ended, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe('runChatAttempt', () => {
  test('answers at [DONE] without waiting for the server to end the body, and frees the connection when it does', async () => {
    const server = await slowToEndServer(1500);
    const pool = new Pool(server.url.origin, { connections: null });
    const context: EndpointContext = { url: server.url.href, model: 'm', redact: (text) => text };
    try {
      const body = Buffer.from(
        JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'Is it in stock?' }], stream: true }),
      );
      const started = performance.now();
      const result = await runChatAttempt({
        target: chatRequestTarget(server.url),
        dispatcher: pool,
        headers: ['content-type', 'application/json'],
        body,
        timeoutMs: 10_000,
        context,
        clock: systemClock,
      });
      expect(performance.now() - started).toBeLessThan(1000);
      expect(result.message).toEqual({ role: 'assistant', content: 'In stock' });
      expect(result.usage).toEqual({ promptTokens: 12, completionTokens: 2 });
      await server.ended;
      // The body is still read to its end, so the keep-alive connection goes back to the pool.
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(pool.stats).toMatchObject({ connected: 1, free: 1, running: 0 });
    } finally {
      await pool.destroy();
      await server.close();
    }
  });
});
