import {
  convertChineseNumerals,
  extractMoneyAmounts,
  extractNumbers,
  normalizeForMatch,
  parseChineseInteger,
} from './normalize-text';

describe('parseChineseInteger', () => {
  it.each([
    ['二百九十九', 299],
    ['两百', 200],
    ['三百五', 350],
    ['三百零五', 305],
    ['一千二', 1200],
    ['一千二百九十九', 1299],
    ['两万三', 23000],
    ['十五', 15],
    ['二十', 20],
    ['一九九', 199],
    ['十', 10],
  ])('%s = %d', (text, value) => {
    expect(parseChineseInteger(text)).toBe(value);
  });
});

describe('normalizeForMatch', () => {
  it('reads full-width digits, Chinese numerals, 块 shorthand and trailing zeros the same way', () => {
    expect(normalizeForMatch('到手价２９９元')).toBe('到手价299元');
    expect(normalizeForMatch('到手二百九十九块')).toBe('到手299块');
    expect(normalizeForMatch('只要九块九')).toBe('只要9.9元');
    expect(normalizeForMatch('¥299.00')).toBe('¥299');
    expect(normalizeForMatch('1,299.50元')).toBe('1299.5元');
    expect(normalizeForMatch('保修 一 年')).toBe('保修1年');
    expect(normalizeForMatch('1.5万')).toBe('15000');
  });

  it('leaves words that merely contain numeral characters alone', () => {
    expect(convertChineseNumerals('百搭千万别错过十分好看')).toBe('百搭千万别错过十分好看');
    expect(convertChineseNumerals('满一百减十块')).toBe('满100减10块');
  });
});

describe('extractNumbers and extractMoneyAmounts', () => {
  it('finds the same price however it is written', () => {
    for (const text of ['到手299元', '到手¥299.00', '到手二百九十九块', '到手 ２９９ 元', '到手价：299']) {
      expect(extractNumbers(text)).toContain(299);
    }
  });

  it('counts only amounts with a currency mark as money', () => {
    expect(extractMoneyAmounts('满300减50，到手249元，还送2件')).toEqual([249]);
    expect(extractMoneyAmounts('¥19.9 或 二十块')).toEqual([19.9, 20]);
  });
});
