/**
 * Secrets inside URLs: userinfo (`http://user:sk-…@host/v1`) and secret-looking query parameters
 * (`?api_key=…`, a presigned `X-Amz-Signature=…`). No URI the pipeline accepts may carry them: keys
 * come from the environment or files. Anything that is logged, stored or shown goes through
 * `redactUrlCredentials`, so a URL that slipped in another way (an error text quoting a server's
 * redirect, a header) never shows its secret.
 */

/** `scheme://userinfo@`: userinfo stops at the first `/`, `?`, `#` or whitespace. */
const userinfoPattern = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@]+@/gi;

/** Query parameter names whose value is a secret (compared without case). */
export const secretQueryParameterNames = [
  'api_key',
  'api-key',
  'apikey',
  'key',
  'token',
  'access_token',
  'auth',
  'client_secret',
  'secret',
  'password',
  'passwd',
  'sig',
  'signature',
  'x-amz-signature',
  'x-amz-credential',
  'x-amz-security-token',
];

/**
 * `?name=value` or `&name=value` for a secret name; the value stops at `&`, `#`, whitespace, a
 * quote or a backslash (the end of a string inside a JSON log line).
 */
const secretNames = secretQueryParameterNames.map((name) => name.replace(/-/g, '\\-')).join('|');
const secretQueryPattern = new RegExp(`([?&](?:${secretNames})=)[^&#\\s"'\\\\]+`, 'gi');

/** A secret query parameter inside a URL (detection is stricter than redaction: prose may say `?key=`). */
const urlSecretQueryPattern = new RegExp(`\\b[a-z][a-z0-9+.-]*:\\/\\/[^\\s?#]*\\?(?:[^\\s#]*&)?(${secretNames})=`, 'i');

/**
 * The text with every URL's userinfo and every secret query value replaced by `[redacted]`. The one
 * redaction for log lines, error texts, Redis payloads and reports.
 */
export function redactUrlCredentials(text: string): string {
  let redacted = text.includes('@') ? text.replace(userinfoPattern, '$1[redacted]@') : text;
  if (redacted.includes('=')) redacted = redacted.replace(secretQueryPattern, '$1[redacted]');
  return redacted;
}

/**
 * What secret the text holds, in words that do not repeat it (`userinfo (user:password@)`,
 * `the query parameter "api_key"`), or undefined when it holds none.
 */
export function describeUrlCredentials(text: string): string | undefined {
  userinfoPattern.lastIndex = 0;
  const userinfo = userinfoPattern.test(text);
  userinfoPattern.lastIndex = 0;
  if (userinfo) return 'userinfo (user:password@)';
  const query = urlSecretQueryPattern.exec(text);
  if (query) return `the query parameter ${JSON.stringify(query[1])}`;
  return undefined;
}

/** Whether the text holds a URL with userinfo or a secret query parameter. */
export function hasUrlCredentials(text: string): boolean {
  return describeUrlCredentials(text) !== undefined;
}

export interface UrlCredentialProblem {
  path: (string | number)[];
  message: string;
}

/** Every string in a config value (any depth) that holds a URL with credentials, by path. */
export function findUrlCredentials(value: unknown, path: (string | number)[] = []): UrlCredentialProblem[] {
  if (typeof value === 'string') {
    const found = describeUrlCredentials(value);
    return found
      ? [
          {
            path,
            message: `holds credentials in a URL (${found}); remove them and give the key with apiKeyEnv or apiKeyFile (S3: AWS_* variables)`,
          },
        ]
      : [];
  }
  if (Array.isArray(value)) return value.flatMap((item, index) => findUrlCredentials(item, [...path, index]));
  if (value !== null && typeof value === 'object') {
    return Object.entries(value as Record<string, unknown>).flatMap(([key, item]) =>
      findUrlCredentials(item, [...path, key]),
    );
  }
  return [];
}
