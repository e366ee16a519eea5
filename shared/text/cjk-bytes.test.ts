import { cjkBytes, cjkShare } from './cjk-bytes';

describe('cjkBytes', () => {
  it('counts the UTF-8 bytes of Han characters, CJK punctuation and full-width forms, not Latin, digits or emoji', () => {
    expect(cjkBytes('羽绒服')).toEqual({ bytes: 9, cjk: 9 });
    expect(cjkBytes('，。（）【】')).toEqual({ bytes: 18, cjk: 18 });
    expect(cjkBytes('{"price":299}')).toEqual({ bytes: 13, cjk: 0 });
    expect(cjkBytes('有货🙏')).toEqual({ bytes: 10, cjk: 6 });
    expect(cjkBytes('𠀋')).toEqual({ bytes: 4, cjk: 4 });
    expect(cjkBytes('')).toEqual({ bytes: 0, cjk: 0 });
  });

  it('gives the share as bytes over bytes, as Buffer.byteLength counts them', () => {
    const text = '{"title":"云岚羽绒服 90%白鸭绒"}';
    expect(cjkBytes(text).bytes).toBe(Buffer.byteLength(text));
    expect(cjkShare(text)).toBeCloseTo(24 / Buffer.byteLength(text), 10);
    expect(cjkShare('')).toBe(0);
  });
});
