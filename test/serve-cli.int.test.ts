import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { CliContext } from '../cli/cli-context';
import { runCli } from '../cli/main';
import { runHatInProcess } from './support/hat-in-process';

/** `hat serve` as users start it: prints where it listens, serves, stops on SIGTERM; bad arguments exit 2. */
describe('hat serve (CLI)', () => {
  let cacheDir: string;
  beforeAll(() => {
    cacheDir = mkdtempSync(join(tmpdir(), 'hat-serve-cli-'));
  });
  afterAll(() => rmSync(cacheDir, { recursive: true, force: true }));

  it('serves a dummy model, labelled, until SIGTERM', async () => {
    const stdout = new PassThrough();
    let printed = '';
    stdout.on('data', (chunk: Buffer) => (printed += chunk.toString()));
    const environment = { ...process.env, HAT_LOG_LEVEL: 'error', VLLM_API_KEY: 'sesame' };
    const argv = [
      'serve',
      'dummy:bytes?layers=1&hidden=16&heads=2&kvHeads=1',
      '--port',
      '0',
      '--cache-dir',
      cacheDir,
      '--max-model-len',
      '512',
    ];
    const running = runCli(argv, new CliContext(stdout, new PassThrough(), environment));
    let baseUrl: string | undefined;
    for (let attempt = 0; attempt < 600 && !baseUrl; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      baseUrl = /hat serve: (http:\/\/\S+\/v1)/.exec(printed)?.[1];
    }
    expect(baseUrl).toBeDefined();
    // The key comes from VLLM_API_KEY, as with vLLM; /health stays open.
    expect((await fetch(`${baseUrl}/models`)).status).toBe(401);
    expect((await fetch(`${baseUrl!.replace(/\/v1$/, '')}/health`)).status).toBe(200);
    const models = (await (
      await fetch(`${baseUrl}/models`, { headers: { authorization: 'Bearer sesame' } })
    ).json()) as any;
    expect(models.data[0]).toMatchObject({
      hat_dummy_weights: true,
      logprobs_mode: 'raw_logprobs',
      hat_tool_call_parser: 'hermes',
      max_model_len: 512,
    });
    expect(printed).toContain('random weights (dummy model)');
    process.emit('SIGTERM');
    expect(await running).toBe(0);
    await expect(fetch(`${baseUrl}/models`)).rejects.toThrow();
  });

  it('refuses a port already in use with exit code 2, naming the port', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', () => resolve()));
    const port = String((blocker.address() as AddressInfo).port);
    try {
      const result = await runHatInProcess(
        process.env,
        'serve',
        'dummy:bytes?layers=1&hidden=16&heads=2&kvHeads=1',
        '--cache-dir',
        cacheDir,
        '--port',
        port,
      );
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(new RegExp(`SERVE_LISTEN_FAILED.*:${port} \\(EADDRINUSE\\)`));
    } finally {
      blocker.close();
    }
  });

  it.each([
    [['serve', 'dummy:bytes?layers=0', '--cache-dir'], /SERVE_MODEL_SPEC.*layers/],
    [['serve', '/nonexistent/model-dir'], /SERVE_MODEL_SPEC.*neither a directory/],
    [['serve', 'dummy:bytes', '--logprobs-mode', 'final'], /--logprobs-mode takes raw_logprobs or processed_logprobs/],
    [
      ['serve', 'dummy:bytes?layers=1&hidden=16&heads=2&kvHeads=1', '--tool-call-parser', 'nope', '--cache-dir'],
      /TOOL_PARSER_UNKNOWN/,
    ],
  ])('refuses %j with exit code 2', async (argv, message) => {
    const args = argv[argv.length - 1] === '--cache-dir' ? [...argv, cacheDir] : argv;
    const result = await runHatInProcess(process.env, ...args);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
  });
});
