import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describeServer } from './target-info';

/** A local HTTP server answering what vLLM or SGLang answer about themselves (shapes from their sources). */
async function fakeServer(routes: Record<string, unknown>): Promise<{ root: string; close(): Promise<void> }> {
  const server = http.createServer((request, response) => {
    const body = routes[request.url ?? ''];
    if (body === undefined) {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{"detail":"Not Found"}');
      return;
    }
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    root: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('describeServer', () => {
  it('reads a vLLM server: engine from owned_by, version, model ids with max_model_len', async () => {
    const server = await fakeServer({
      '/v1/models': {
        object: 'list',
        data: [{ id: 'qwen3-35b', object: 'model', owned_by: 'vllm', root: '/models/qwen3', max_model_len: 65536 }],
      },
      '/version': { version: '0.11.0' },
    });
    try {
      expect(await describeServer(`${server.root}/`)).toEqual({
        engine: 'vllm',
        version: '0.11.0',
        models: [{ id: 'qwen3-35b', maxModelLen: 65536 }],
        specDecodeMetrics: [],
        unreadable: [],
      });
    } finally {
      await server.close();
    }
  });

  it("reads SGLang's speculative settings from /get_server_info and lists what did not answer", async () => {
    const server = await fakeServer({
      '/v1/models': { object: 'list', data: [{ id: 'qwen3', owned_by: 'sglang', max_model_len: 32768 }] },
      '/get_server_info': {
        tp_size: 1,
        speculative_algorithm: 'EAGLE',
        speculative_num_steps: 3,
        speculative_num_draft_tokens: 4,
        speculative_draft_model_path: null,
      },
    });
    try {
      const info = await describeServer(server.root);
      expect(info).toMatchObject({
        engine: 'sglang',
        models: [{ id: 'qwen3', maxModelLen: 32768 }],
        settings: { speculative_algorithm: 'EAGLE', speculative_num_steps: 3, speculative_num_draft_tokens: 4 },
      });
      expect(info.version).toBeUndefined();
      expect(info.unreadable).toEqual(['/version: HTTP 404']);
    } finally {
      await server.close();
    }
  });
});
