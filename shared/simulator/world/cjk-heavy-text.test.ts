import { hashValue } from '../../hash/hash';
import { cjkShare } from '../../text/cjk-bytes';
import { specPhrases } from '../tasks/expectations';
import { extractMoneyAmounts } from '../text/normalize-text';
import { advertisingLawTerms, inventedPromisePatterns } from '../verifier/compliance-rules';
import { subcategoryTemplates } from './catalog-vocabulary';
import { specValueLimit, titleLimit } from './cjk-heavy-text';
import * as vocabulary from './cjk-heavy-vocabulary';
import { generateRoomSnapshot } from './generate-world';
import type { RoomSnapshot } from './room-snapshot';

const length = (text: string) => [...text].length;

/** Every string a value holds, at any depth. */
function strings(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap(strings);
  if (value !== null && typeof value === 'object') return Object.values(value).flatMap(strings);
  return [];
}

/** The texts a cjk-heavy world rewrites. */
function rewritten(snapshot: RoomSnapshot): string[] {
  return [
    ...snapshot.items.flatMap((item) => [item.title, ...Object.values(item.specs), ...item.sellingPoints]),
    ...snapshot.policies.flatMap((policy) => [policy.returnNote, policy.warrantyNote]),
    ...snapshot.campaigns.flatMap((campaign) => [...campaign.talkingPoints, ...(campaign.gift ? [campaign.gift] : [])]),
    snapshot.host.style,
  ];
}

describe('generateWorld with text: cjk-heavy', () => {
  const plain = generateRoomSnapshot({ seed: 'cjk', itemCount: 1500 });
  const heavy = generateRoomSnapshot({ seed: 'cjk', itemCount: 1500, text: 'cjk-heavy' });

  it('is the default world with longer text: every id, price, SKU, chart, coupon and rule is the same', () => {
    const withoutText = (snapshot: RoomSnapshot) => ({
      ...snapshot,
      host: snapshot.host.name,
      items: snapshot.items.map(({ title: _title, specs, sellingPoints: _points, ...rest }) => ({
        ...rest,
        specKeys: Object.keys(specs),
      })),
      policies: snapshot.policies.map(({ returnNote: _returns, warrantyNote: _warranty, ...rest }) => rest),
      campaigns: snapshot.campaigns.map(({ talkingPoints: _points, gift, ...rest }) => ({ ...rest, gift: !!gift })),
    });
    expect(hashValue(withoutText(heavy))).toBe(hashValue(withoutText(plain)));
    expect(hashValue(heavy)).not.toBe(hashValue(plain));
  });

  it('is deterministic under the seed, and a larger catalog extends a smaller one', () => {
    expect(hashValue(generateRoomSnapshot({ seed: 'cjk', itemCount: 1500, text: 'cjk-heavy' }))).toBe(hashValue(heavy));
    expect(generateRoomSnapshot({ seed: 'cjk', itemCount: 40, text: 'cjk-heavy' }).items).toEqual(
      heavy.items.slice(0, 40),
    );
  });

  it('writes Taobao-style titles of 30 to 60 characters that name no other product', () => {
    const titles = heavy.items.map((item) => item.title);
    expect(Math.min(...titles.map(length))).toBeGreaterThanOrEqual(30);
    expect(Math.max(...titles.map(length))).toBeLessThanOrEqual(titleLimit);
    const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
    expect(mean(titles.map(length))).toBeGreaterThan(2.5 * mean(plain.items.map((item) => length(item.title))));
    const names = subcategoryTemplates.map((template) => template.name);
    const misnamed = heavy.items.filter(
      (item) =>
        !(item.title.startsWith(item.brand) || item.title.includes(`】${item.brand}`)) ||
        names.some((name) => name !== item.subcategory && item.title.includes(name)),
    );
    expect(misnamed.map((item) => item.title)).toEqual([]);
  });

  it('keeps what answers quote at the front: spec values, selling points and notes start as the default ones', () => {
    const changed: string[] = [];
    plain.items.forEach((item, index) => {
      const long = heavy.items[index];
      for (const [key, value] of Object.entries(item.specs)) {
        const longValue = long.specs[key];
        // What a verifier accepts for the default value it accepts for the long one.
        const accepted = specPhrases(longValue);
        if (
          !longValue.startsWith(value) ||
          length(longValue) > Math.max(specValueLimit, length(value)) ||
          !specPhrases(value).every((phrase) => accepted.includes(phrase))
        )
          changed.push(`${key}: ${value} -> ${longValue}`);
      }
      item.sellingPoints.forEach((point, pointIndex) => {
        if (!long.sellingPoints[pointIndex].startsWith(`${point}，`)) changed.push(long.sellingPoints[pointIndex]);
      });
      if (long.sellingPoints.length <= item.sellingPoints.length)
        changed.push(`${item.itemId}: no extra selling point`);
    });
    expect(changed).toEqual([]);
    plain.policies.forEach((policy, index) => {
      expect(heavy.policies[index].returnNote.startsWith(`${policy.returnNote}，`)).toBe(true);
      expect(heavy.policies[index].warrantyNote.startsWith(`${policy.warrantyNote}，`)).toBe(true);
    });
    plain.campaigns.forEach((campaign, index) => {
      expect(heavy.campaigns[index].talkingPoints.length).toBeGreaterThanOrEqual(3);
      if (campaign.gift !== undefined) expect(heavy.campaigns[index].gift?.startsWith(campaign.gift)).toBe(true);
    });
  });

  it('adds no money amounts, absolute claims or invented promises a quoted reply could carry', () => {
    const problems = [...new Set(rewritten(heavy))].filter(
      (text) =>
        extractMoneyAmounts(text).length > 0 ||
        advertisingLawTerms.some((term) => text.includes(term)) ||
        inventedPromisePatterns.some(([pattern]) => pattern.test(text)),
    );
    expect(problems).toEqual([]);
  });

  it('mentions none of the attributes the catalog does not record (unknown_spec questions stay unknown)', () => {
    const unrecorded = [
      '起球',
      'A类',
      '掉毛',
      '孕妇',
      '植物',
      '痘',
      '糖尿病',
      '防腐剂',
      '电脑',
      '无线充电',
      '甲醛',
      '机洗',
    ];
    for (const text of strings(vocabulary)) for (const word of unrecorded) expect(text).not.toContain(word);
  });

  it('has titles for every product and text that is almost all CJK', () => {
    for (const template of subcategoryTemplates) expect(vocabulary.titleWords[template.name]).toBeDefined();
    expect(cjkShare(rewritten(heavy).join(''))).toBeGreaterThan(0.9);
    expect(cjkShare(JSON.stringify(heavy))).toBeGreaterThan(cjkShare(JSON.stringify(plain)) + 0.15);
  });
});
