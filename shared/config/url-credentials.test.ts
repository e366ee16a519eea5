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

describe('URL credentials an operator pastes (issue #37)', () => {
  const awsSecret = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';

  it('finds and redacts a userinfo secret that holds "/" or "@" (AWS secret keys hold "/" and "+")', () => {
    for (const uri of [
      `s3://AKIAIOSFODNN7EXAMPLE:${awsSecret}@bucket/x`,
      `s3://AKIAIOSFODNN7EXAMPLE:7/${awsSecret}@bucket/x`,
      `http://user:${awsSecret}@127.0.0.1:8000/v1`,
      'https://user:p@ss@host/v1',
    ]) {
      expect([uri, describeUrlCredentials(uri)]).toEqual([uri, 'userinfo (user:password@)']);
      const redacted = redactUrlCredentials(`failed: ${uri} (retrying)`);
      expect(redacted).not.toMatch(/wJalr|p@ss|AKIA/);
      expect(redacted).toMatch(/^failed: [a-z0-9]+:\/\/\[redacted\]@(bucket|127\.0\.0\.1|host)/);
    }
  });

  it('keeps "@" and ":" that are not userinfo', () => {
    for (const text of [
      'http://127.0.0.1:8000/v1/models/team@org',
      's3://bucket/runs/a:b@c.json',
      '{"a":"http://host","b":"ops@example.com"}',
      'http://[::1]:8000/v1 and ops@example.com',
    ]) {
      expect([text, hasUrlCredentials(text)]).toEqual([text, false]);
      expect(redactUrlCredentials(text)).toBe(text);
    }
  });

  it.each([
    ['s3://bucket/x?X-Goog-Signature=abc123', 'X-Goog-Signature'],
    ['s3://bucket/x?X-Goog-Credential=abc123', 'X-Goog-Credential'],
    ['s3://bucket/x?AWSAccessKeyId=AKIA1&Expires=1', 'AWSAccessKeyId'],
    ['https://h/v1?refresh_token=abc123', 'refresh_token'],
    ['https://h/v1?client_secret=abc123', 'client_secret'],
    ['https://h/v1?x-api-key=abc123', 'x-api-key'],
    ['https://h/v1?apiKey=abc123', 'apiKey'],
    ['https://h/v1?sessionToken=abc123', 'sessionToken'],
    ['https://acct.blob.example/c?sv=2024&sig=abc123', 'sig'],
    ['https://h/cb#access_token=abc123', 'access_token'],
    ['file:/tmp/out?token=abc123', 'token'],
  ])('refuses %s (the parameter %s) and redacts its value', (uri, name) => {
    expect(describeUrlCredentials(uri)).toBe(`the query parameter ${JSON.stringify(name)}`);
    expect(redactUrlCredentials(`GET ${uri} failed`)).toBe(
      `GET ${uri.replace(/=(abc123|AKIA1)/, '=[redacted]')} failed`,
    );
  });

  it('leaves parameters that only look alike', () => {
    for (const uri of [
      'http://h/v1?max_tokens=16&keyword=a&tokenizer=qwen3',
      'http://h/v1?monkey=1&keys=2&passage=3',
      'http://h/v1?token=',
    ]) {
      expect([uri, hasUrlCredentials(uri)]).toEqual([uri, false]);
      expect(redactUrlCredentials(uri)).toBe(uri);
    }
  });

  it('redacts credential headers quoted in raw HTTP text, raw or inside a JSON string', () => {
    const request = 'GET /v1 HTTP/1.1\r\nAuthorization: Bearer sk-live-1\r\nx-api-key: k-2\r\nHost: h\r\n';
    expect(redactUrlCredentials(request)).toBe(
      'GET /v1 HTTP/1.1\r\nAuthorization: [redacted]\r\nx-api-key: [redacted]\r\nHost: h\r\n',
    );
    expect(redactUrlCredentials(JSON.stringify({ _header: request }))).toBe(
      JSON.stringify({
        _header: 'GET /v1 HTTP/1.1\r\nAuthorization: [redacted]\r\nx-api-key: [redacted]\r\nHost: h\r\n',
      }),
    );
    expect(redactUrlCredentials('{"authorization":"[redacted]","cookie":"a=1"}')).toBe(
      '{"authorization":"[redacted]","cookie":"a=1"}',
    );
  });

  it('redacts a secret in an HTML-escaped address', () => {
    expect(redactUrlCredentials('<a href="https://h/r?a=1&amp;token=abc123">')).toBe(
      '<a href="https://h/r?a=1&amp;token=[redacted]">',
    );
  });
});
