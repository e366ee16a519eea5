import { OpenAiTestServer } from '../models/testing/openai-test-server';
import { parsePrometheusText } from './prometheus-text';
import { scrapePrometheus } from './scrape-metrics';
import { readSpecDecodeCounters, specDecodeDelta } from './spec-decode';

describe('Prometheus text and spec-decode counters', () => {
  it('parses labels with escapes, special values and timestamps, and names the bad line', () => {
    const samples = parsePrometheusText(
      [
        '# HELP x_total a counter',
        '# TYPE x_total counter',
        'x_total{path="/a\\"b\\\\c",note="line\\nbreak"} 3 1700000000000',
        'up 1',
        'temperature{room="k"} -Inf',
        'ratio NaN',
        '',
      ].join('\n'),
    );
    expect(samples[0]).toEqual({
      name: 'x_total',
      labels: { path: '/a"b\\c', note: 'line\nbreak' },
      value: 3,
      timestamp: 1700000000000,
    });
    expect(samples[1]).toEqual({ name: 'up', labels: {}, value: 1 });
    expect(samples[2]?.value).toBe(Number.NEGATIVE_INFINITY);
    expect(samples[3]?.value).toBeNaN();
    expect(() => parsePrometheusText('ok 1\nbroken{a="1" 2\n', 'http://x/metrics')).toThrow(
      /BAD_METRICS_TEXT.*http:\/\/x\/metrics: line 2/,
    );
  });

  it("reads vLLM's counters from a real /metrics endpoint and computes acceptance as vLLM does", async () => {
    const server = await OpenAiTestServer.start();
    try {
      const url = `${server.url}/metrics`;
      const advance = (
        update: typeof server.metrics.set,
        drafts: number,
        draftTokens: number,
        accepted: number,
        perPosition: number[],
      ) => {
        update.call(server.metrics, 'vllm:spec_decode_num_drafts_total', drafts, {});
        update.call(server.metrics, 'vllm:spec_decode_num_draft_tokens_total', draftTokens, {});
        update.call(server.metrics, 'vllm:spec_decode_num_accepted_tokens_total', accepted, {});
        perPosition.forEach((value, position) =>
          update.call(server.metrics, 'vllm:spec_decode_num_accepted_tokens_per_pos_total', value, {
            position: String(position),
          }),
        );
      };
      advance(server.metrics.set, 100, 300, 150, [70, 50, 30]);
      const before = readSpecDecodeCounters(await scrapePrometheus(url));
      expect(before).toEqual({
        drafts: 100,
        draftTokens: 300,
        acceptedTokens: 150,
        acceptedPerPosition: [70, 50, 30],
        present: true,
      });
      advance(server.metrics.increment, 40, 120, 90, [36, 30, 24]);
      const after = readSpecDecodeCounters(await scrapePrometheus(url));
      expect(specDecodeDelta(before, after)).toEqual({
        available: true,
        note: expect.stringContaining('server-wide'),
        drafts: 40,
        draftTokens: 120,
        acceptedTokens: 90,
        acceptedPerPosition: [36, 30, 24],
        acceptanceRate: 0.75,
        acceptanceLength: 3.25,
        perPositionAcceptanceRate: [0.9, 0.75, 0.6],
      });
      expect(specDecodeDelta(after, before)).toMatchObject({
        available: false,
        note: expect.stringContaining('restarted'),
      });
    } finally {
      await server.close();
    }
  });

  it('says when a server has no spec-decode counters, and when it cannot be read', async () => {
    const none = readSpecDecodeCounters(parsePrometheusText('vllm:num_requests_running{engine="0"} 2\n'));
    expect(specDecodeDelta(none, none)).toMatchObject({
      available: false,
      note: expect.stringContaining('no vllm:spec_decode_* counters'),
    });
    await expect(scrapePrometheus('http://127.0.0.1:9/metrics', { timeoutMs: 2000 })).rejects.toThrow(
      /METRICS_SCRAPE_FAILED.*127\.0\.0\.1:9/,
    );
  });
});
