/**
 * Credentials inside URLs (`http://user:sk-…@host/v1`). A config may not carry them: keys come
 * from the environment or files. Anything that is logged or stored goes through
 * `redactUrlCredentials`, so a URL that slipped in another way (an error text quoting a server's
 * redirect, a header) never shows its userinfo.
 */

/** `scheme://userinfo@`: userinfo stops at the first `/`, `?`, `#` or whitespace. */
const userinfoPattern = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@]+@/gi;

/** The text with every URL's userinfo replaced by `[redacted]`. */
export function redactUrlCredentials(text: string): string {
  return text.includes('@') ? text.replace(userinfoPattern, '$1[redacted]@') : text;
}

/** Whether the text holds a URL with userinfo. */
export function hasUrlCredentials(text: string): boolean {
  userinfoPattern.lastIndex = 0;
  const found = userinfoPattern.test(text);
  userinfoPattern.lastIndex = 0;
  return found;
}

export interface UrlCredentialProblem {
  path: (string | number)[];
  message: string;
}

/** Every string in a config value (any depth) that holds a URL with credentials, by path. */
export function findUrlCredentials(value: unknown, path: (string | number)[] = []): UrlCredentialProblem[] {
  if (typeof value === 'string') {
    return hasUrlCredentials(value)
      ? [
          {
            path,
            message:
              'holds credentials in a URL (user:password@); remove them and give the key with apiKeyEnv or apiKeyFile (S3: AWS_* variables)',
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
