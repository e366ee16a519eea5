import { BadInputError } from '../errors';

/**
 * Secrets inside URLs: userinfo (`http://user:sk-…@host/v1`) and secret-looking query parameters
 * (`?api_key=…`, a presigned `X-Amz-Signature=…`). No URI the pipeline accepts may carry them: keys
 * come from the environment or files. Anything that is logged, stored or shown goes through
 * `redactUrlCredentials`, so a URL that slipped in another way (an error text quoting a server's
 * redirect, a header) never shows its secret.
 */

/** Characters that end a URL inside a text, a JSON line or an HTML attribute. */
const urlEnd = String.raw`\s"'\\<>`;

/**
 * `scheme://userinfo@`. Userinfo normally stops at the first `/`, `?` or `#`, and runs to the last
 * `@` before it (a password may hold an `@`). A password may also hold a `/` (AWS secret keys
 * do): then the colon after the user name is not followed by a port, and the userinfo runs to the
 * last `@` before a `?`, `#` or the end of the URL. `s3://` and `file://` URIs never carry a port,
 * so any colon there starts a password.
 */
const userinfoPattern = new RegExp(
  [
    String.raw`\b([a-z][a-z0-9+.-]{0,31}:\/\/)(?:`,
    String.raw`[^/?#${urlEnd}]+@`,
    String.raw`|(?<=(?:s3|file):\/\/)[^/?#@:${urlEnd}]*:[^?#${urlEnd}]*@`,
    String.raw`|[^/?#@:\[\]${urlEnd}]+:(?!\d*\/)[^/?#${urlEnd}]*\/[^?#${urlEnd}]*@`,
    ')',
  ].join(''),
  'gi',
);

/** The last word of a parameter name that makes its value a secret (`api_key`, `X-Amz-Signature`, `sessionToken`). */
const secretWords = new Set([
  'key',
  'apikey',
  'token',
  'jwt',
  'bearer',
  'secret',
  'password',
  'passwd',
  'pwd',
  'pass',
  'auth',
  'sig',
  'signature',
  'credential',
  'credentials',
]);

/** Whole parameter names (lower case, separators dropped) whose value is a secret though their last word is not. */
const secretNames = new Set(['awsaccesskeyid']);

/**
 * Whether a query or fragment parameter's value is a secret, by its name: the name's last word
 * (split at `_`, `-`, `.` and camelCase) is one of `secretWords` (`api_key`, `x-api-key`,
 * `refresh_token`, `client_secret`, `X-Amz-Signature`, `X-Goog-Credential`, `sig`), or the name
 * is one of `secretNames`. `max_tokens`, `keyword` and `tokenizer` are not.
 */
export function isSecretParameterName(name: string): boolean {
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[\s_.-]+/)
    .filter((word) => word !== '');
  const last = words.at(-1);
  return last !== undefined && (secretWords.has(last) || secretNames.has(words.join('')));
}

/**
 * `name=value` after `?`, `&`, `#` or `;` (so `&amp;` in HTML too); the value stops at the next of
 * those or at the end of a URL in a text.
 */
const parameterPattern = new RegExp(String.raw`([?&#;])([A-Za-z0-9_.-]+)=([^&#;${urlEnd}]+)`, 'g');

/** A URL in a text: `scheme://…`, or `file:…` with any number of slashes. */
const urlPattern = new RegExp(String.raw`\b(?:[a-z][a-z0-9+.-]{0,31}:\/\/|file:)[^${urlEnd}]*`, 'gi');

/**
 * A credential header in raw HTTP text (`authorization: Bearer sk-…` in a request's `_header`, which
 * a logged response object carries), at the start of a line (after a JSON-escaped `\n` too); the
 * value runs to the end of its line.
 */
const credentialHeaderPattern =
  /(?:(?<=\\[rnt])|(?<![\w-]))((?:proxy-)?authorization|x-api-key|api-key|x-goog-api-key|x-amz-security-token|cookie|set-cookie)([ \t]*:[ \t]*)[^\r\n"\\]+/gi;

/** A cheap test that a text may hold a credential header (the full pattern costs ten times more a line). */
const credentialHeaderHint = /(?:authorization|api-key|cookie|security-token)[ \t]*:/i;

/**
 * The text with every URL's userinfo, every secret parameter value and every credential header's
 * value replaced by `[redacted]`. The one redaction for log lines, error texts, Redis payloads, CLI
 * output and reports. It never crosses a quote, so a JSON or HTML text stays well formed.
 */
export function redactUrlCredentials(text: string): string {
  let redacted = text.includes('@') && text.includes('://') ? text.replace(userinfoPattern, '$1[redacted]@') : text;
  if (redacted.includes('='))
    redacted = redacted.replace(parameterPattern, (whole, separator: string, name: string) =>
      isSecretParameterName(name) ? `${separator}${name}=[redacted]` : whole,
    );
  return credentialHeaderHint.test(redacted) ? redacted.replace(credentialHeaderPattern, '$1$2[redacted]') : redacted;
}

/**
 * A copy of a JSON value with `redactUrlCredentials` applied to every string in it (job data and
 * results read back from Redis, a run status).
 */
export function redactUrlCredentialsIn<T>(value: T): T {
  const text = JSON.stringify(value);
  return text === undefined ? value : (JSON.parse(redactUrlCredentials(text)) as T);
}

/** The secret parameter a URL's query or fragment holds (with a value), if any. */
function secretParameterOf(url: string): string | undefined {
  const start = url.search(/[?#]/);
  if (start === -1) return undefined;
  for (const parameter of url.slice(start + 1).split(/[?&#;]/)) {
    const equals = parameter.indexOf('=');
    if (equals > 0 && equals < parameter.length - 1 && isSecretParameterName(parameter.slice(0, equals)))
      return parameter.slice(0, equals);
  }
  return undefined;
}

/**
 * What secret the text holds, in words that do not repeat it (`userinfo (user:password@)`,
 * `the query parameter "api_key"`), or undefined when it holds none. Only URLs count: prose may
 * say `?key=`.
 */
export function describeUrlCredentials(text: string): string | undefined {
  userinfoPattern.lastIndex = 0;
  const userinfo = userinfoPattern.test(text);
  userinfoPattern.lastIndex = 0;
  if (userinfo) return 'userinfo (user:password@)';
  for (const [url] of text.matchAll(urlPattern)) {
    const name = secretParameterOf(url);
    if (name) return `the query parameter ${JSON.stringify(name)}`;
  }
  return undefined;
}

/** Whether the text holds a URL with userinfo or a secret query parameter. */
export function hasUrlCredentials(text: string): boolean {
  return describeUrlCredentials(text) !== undefined;
}

/**
 * The message for a setting whose URL holds credentials (`found` as `describeUrlCredentials` gives
 * it): what was found, without the secret, and where keys belong instead.
 */
export function credentialsProblem(found: string): string {
  return (
    `holds credentials in the URL (${found}), which would be logged, stored in Redis and shown in reports; ` +
    'remove them: keys belong in the environment (model keys: the variable named by apiKeyEnv, or apiKeyFile; ' +
    'S3 keys: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the AWS profile)'
  );
}

/**
 * Refuses a value holding a URL with credentials, exit 2 with `[URI_CREDENTIALS]`; `where` names
 * the setting (`--out`, `HAT_ARTIFACTS`, `artifact URI`). The value is shown redacted.
 */
export function refuseUrlCredentials(value: string, where: string): void {
  const found = describeUrlCredentials(value);
  if (found)
    throw new BadInputError(
      'URI_CREDENTIALS',
      `${where} ${JSON.stringify(redactUrlCredentials(value))} ${credentialsProblem(found)}`,
    );
}

export interface UrlCredentialProblem {
  path: (string | number)[];
  message: string;
}

/** Every string in a value (any depth: a config, job data) that holds a URL with credentials, by path. */
export function findUrlCredentials(value: unknown, path: (string | number)[] = []): UrlCredentialProblem[] {
  if (typeof value === 'string') {
    const found = describeUrlCredentials(value);
    return found ? [{ path, message: credentialsProblem(found) }] : [];
  }
  if (Array.isArray(value)) return value.flatMap((item, index) => findUrlCredentials(item, [...path, index]));
  if (value !== null && typeof value === 'object') {
    return Object.entries(value as Record<string, unknown>).flatMap(([key, item]) =>
      findUrlCredentials(item, [...path, key]),
    );
  }
  return [];
}
