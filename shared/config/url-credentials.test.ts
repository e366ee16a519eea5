import { describeUrlCredentials, findUrlCredentials, hasUrlCredentials, redactUrlCredentials } from './url-credentials';

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

  it('finds secret query parameters in URLs, naming the parameter but not its value', () => {
    expect(describeUrlCredentials('http://h:8000/v1?api_key=sk-1')).toBe('the query parameter "api_key"');
    expect(describeUrlCredentials('s3://b/p?x=1&X-Amz-Signature=abc')).toBe('the query parameter "X-Amz-Signature"');
    expect(describeUrlCredentials('s3://AKIA:SECRET@bucket/p')).toBe('userinfo (user:password@)');
    expect(hasUrlCredentials('http://h/v1?monkey=1&keys=2')).toBe(false);
    expect(hasUrlCredentials('a prompt that says ?key=value outside a URL')).toBe(false);
    expect(findUrlCredentials({ teacher: { baseUrl: 'https://h/v1?token=t' } })[0].message).not.toContain('=t');
  });

  it('redacts secret query values wherever they stand, keeping other parameters', () => {
    expect(redactUrlCredentials('GET https://h/v1?model=m&api_key=sk-1&x=2 failed')).toBe(
      'GET https://h/v1?model=m&api_key=[redacted]&x=2 failed',
    );
    expect(redactUrlCredentials('{"url":"s3://b/k?X-Amz-Credential=AKIA%2F1"}')).toBe(
      '{"url":"s3://b/k?X-Amz-Credential=[redacted]"}',
    );
  });
});
