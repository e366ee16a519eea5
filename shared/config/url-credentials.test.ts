import { findUrlCredentials, hasUrlCredentials, redactUrlCredentials } from './url-credentials';

describe('URL credentials', () => {
  it('finds userinfo in any URL of a config, by path', () => {
    const config = {
      stages: {
        collect: { teacher: { baseUrl: 'http://user:sk-live-123@host:8000/v1' } },
        replay: { targets: [{ url: 'https://tok@x.example/v1' }] },
      },
    };
    expect(findUrlCredentials(config).map((problem) => problem.path.join('.'))).toEqual([
      'stages.collect.teacher.baseUrl',
      'stages.replay.targets.0.url',
    ]);
  });

  it('accepts URLs without userinfo and @ elsewhere in a URL or text', () => {
    expect(hasUrlCredentials('http://127.0.0.1:8000/v1')).toBe(false);
    expect(hasUrlCredentials('s3://bucket/prefix/a@b.json')).toBe(false);
    expect(hasUrlCredentials('http://host/path?email=a@b.c')).toBe(false);
    expect(hasUrlCredentials('mail ops@example.com')).toBe(false);
    expect(findUrlCredentials({ a: 'http://h/x', b: 3, c: [null, 'text'] })).toEqual([]);
  });

  it('redacts userinfo wherever it stands in a text, keeping the rest', () => {
    expect(
      redactUrlCredentials('connect ECONNREFUSED http://user:sk-abc@10.0.0.1:8000/v1/chat (twice: https://k@h/)'),
    ).toBe('connect ECONNREFUSED http://[redacted]@10.0.0.1:8000/v1/chat (twice: https://[redacted]@h/)');
    expect(redactUrlCredentials('no url here')).toBe('no url here');
  });
});
