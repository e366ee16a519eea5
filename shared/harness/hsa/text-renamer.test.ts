import { TextRenamer, mentions, type TextRename } from './text-renamer';

const rename = (from: string, to: string, scope: TextRename['scope'] = 'harness'): TextRename => ({
  from,
  to,
  kind: 'parameter',
  scope,
});

describe('TextRenamer', () => {
  it('renames identifiers only at identifier boundaries', () => {
    const renamer = new TextRenamer([rename('size', 'fit'), rename('item_id', 'productId')]);
    expect(renamer.apply('用 recommend_size 查，传 size 和 item_id；sizes 与 item_ids 不变，"size" 也换')).toBe(
      '用 recommend_size 查，传 fit 和 productId；sizes 与 item_ids 不变，"fit" 也换',
    );
  });

  it('renames in one pass, so swapped names do not chain', () => {
    const renamer = new TextRenamer([rename('height', 'weight'), rename('weight', 'height')]);
    expect(renamer.apply('height=170, weight=60')).toBe('weight=170, height=60');
  });

  it('prefers the longest name when names overlap', () => {
    const renamer = new TextRenamer([rename('售后', '售前'), rename('售后答疑', '售后咨询')]);
    // "售后" is shorter than the phrase minimum, so only the full skill name is renamed.
    expect(renamer.apply('见售后答疑；售后问题')).toBe('见售后咨询；售后问题');
  });

  it('matches phrases in other scripts as substrings, and never touches hook placeholders', () => {
    const renamer = new TextRenamer([rename('必须遵守的约束', '硬性约束'), rename('value', 'amount')]);
    expect(renamer.apply('禁用词见"必须遵守的约束"。不超过{value}个字，value 另算')).toBe(
      '禁用词见"硬性约束"。不超过{value}个字，amount 另算',
    );
  });

  it('reports the names left in a text, each once, with where it was found', () => {
    const renamer = new TextRenamer([rename('get_item_detail', 'fetchGoods', 'entity'), rename('topic', 'subject')]);
    expect(
      renamer.findLeaks('call get_item_detail, then get_item_detail again; topics are fine', 'skills/a.md body'),
    ).toEqual([{ name: 'get_item_detail', kind: 'parameter', where: 'skills/a.md body' }]);
    expect(renamer.findLeaks('fetchGoods(subject)', 'x')).toEqual([]);
  });

  it('mentions() agrees with the renamer about boundaries', () => {
    expect(mentions('get-item', 'item')).toBe(true);
    expect(mentions('get_item', 'item')).toBe(false);
    expect(mentions('SK-7f3a', 'SK')).toBe(true);
  });
});
