import fc from 'fast-check';
import { errorCodeOf } from '../errors';
import { compareKeys, validateKeyPrefix, validateObjectKey } from './object-key';

describe('validateObjectKey', () => {
  it.each(['runs/r1/collect/part-0000.jsonl.gz', 'manifest.json', 'a b/ü-é/x.y', '.hidden/file', 'a/..b/c..'])(
    'accepts %j',
    (key) => {
      expect(validateObjectKey(key)).toBe(key);
    },
  );

  it.each([
    ['', /is empty/],
    ['../escape', /"\.\." segment/],
    ['runs/../../etc/passwd', /"\.\." segment/],
    ['runs/./x', /"\." segment/],
    ['/etc/passwd', /absolute path/],
    ['runs//x', /empty segment/],
    ['runs/x/', /empty segment/],
    ['runs\\x', /backslash/],
    ['runs/x\u0000', /control character/],
    ['runs/x\n', /control character/],
    ['runs/.hat-tmp-0123', /reserved for in-progress writes/],
  ])('rejects %j with BAD_OBJECT_KEY', (key, reason) => {
    let caught: unknown;
    try {
      validateObjectKey(key);
    } catch (error) {
      caught = error;
    }
    expect(errorCodeOf(caught)).toBe('BAD_OBJECT_KEY');
    expect((caught as Error).message).toMatch(reason);
    expect((caught as Error).message).toMatch(/^\[BAD_OBJECT_KEY\] object key /);
  });

  it('rejects keys longer than S3 allows (1024 UTF-8 bytes)', () => {
    expect(() => validateObjectKey('é'.repeat(513))).toThrow(/\[BAD_OBJECT_KEY\].*longer than 1024 bytes/);
    expect(validateObjectKey('é'.repeat(512))).toHaveLength(512);
  });
});

describe('validateKeyPrefix', () => {
  it('accepts empty, folder-like and part-way prefixes', () => {
    for (const prefix of ['', 'runs/', 'runs/r1/collect/part-', 'runs']) expect(validateKeyPrefix(prefix)).toBe(prefix);
  });

  it('rejects the same escapes as keys', () => {
    for (const prefix of ['../', 'runs/../', '/abs', 'a//b', 'a\\b', '..'])
      expect(() => validateKeyPrefix(prefix)).toThrow(/BAD_OBJECT_KEY/);
  });
});

describe('compareKeys', () => {
  it('orders by UTF-8 bytes, as S3 lists (not by UTF-16 code units)', () => {
    // U+FF5E encodes as EF BD 9E, an astral character as F0 ...: bytes put the BMP character first,
    // while UTF-16 code units (0xFF5E vs 0xD83D) would put it last.
    expect(['a/😀', 'a/～'].sort(compareKeys)).toEqual(['a/～', 'a/😀']);
    expect(['a/b', 'a-c', 'a'].sort(compareKeys)).toEqual(['a', 'a-c', 'a/b']);
  });

  it('is a total order consistent with Buffer.compare', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'grapheme' }), (left, right) => {
        expect(Math.sign(compareKeys(left, right))).toBe(
          Math.sign(Buffer.compare(Buffer.from(left), Buffer.from(right))),
        );
        expect(Math.sign(compareKeys(left, right))).toBe(-Math.sign(compareKeys(right, left)) || 0);
      }),
    );
  });
});
