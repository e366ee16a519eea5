/**
 * Removes personal data from viewer messages and host replies before they become tasks:
 * e-mail addresses, ID card numbers, phone numbers (mainland mobiles with or without +86 and
 * spaces or dashes, landlines), order numbers, names after 我叫/收件人/联系人 (and English
 * "my name is"), and postal addresses (Chinese province/city/district/road/number sequences,
 * text after 地址/寄到, English street addresses). Each becomes a bracketed placeholder, so the
 * sentence still reads as a question. Rules run most specific first, so an order number is
 * not mistaken for a phone number.
 */
export const redactionKinds = ['email', 'id_number', 'order_number', 'phone', 'name', 'address'] as const;
export type RedactionKind = (typeof redactionKinds)[number];

export const redactionPlaceholders: Record<RedactionKind, string> = {
  email: '[EMAIL]',
  id_number: '[ID_NUMBER]',
  order_number: '[ORDER_NO]',
  phone: '[PHONE]',
  name: '[NAME]',
  address: '[ADDRESS]',
};

export interface RedactionResult {
  text: string;
  /** How many spans of each kind were replaced. */
  counts: Partial<Record<RedactionKind, number>>;
}

const han = '\\u4e00-\\u9fa5';
type Rule = [RedactionKind, RegExp, (placeholder: string, ...groups: string[]) => string];
const whole = (placeholder: string) => placeholder;
const keepLabel = (placeholder: string, label: string) => `${label}${placeholder}`;

const rules: Rule[] = [
  ['email', /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g, whole],
  // Order numbers first: they are long digit runs that would otherwise read as ID or phone numbers.
  [
    'order_number',
    new RegExp(`(订单编号|订单号|单号|order\\s*(?:no\\.?|number|id|#))\\s*[:：#]?\\s*[A-Za-z0-9-]{6,}`, 'gi'),
    keepLabel,
  ],
  // 18-digit ID numbers carry a birth date (YYYYMMDD) at digits 7-14.
  ['id_number', /(?<![0-9])\d{6}(?:19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx](?![0-9])/g, whole],
  ['order_number', /(?<![0-9])\d{15,20}(?![0-9])/g, whole],
  ['phone', /(?<![0-9+])(?:\+?86[\s-]?)?1[3-9]\d(?:[\s-]?\d{4}){2}(?![0-9])/g, whole],
  ['phone', /(?<![0-9])0\d{2,3}-\d{7,8}(?![0-9])/g, whole],
  [
    'name',
    new RegExp(`(我叫|我的名字是|名字叫|名字是|收件人|收货人|联系人|姓名)\\s*[:：是]?\\s*[${han}·]{2,3}`, 'g'),
    keepLabel,
  ],
  // Case-sensitive on purpose: a name is capitalized ("call me at 021-..." is not a name).
  [
    'name',
    /\b([Mm]y name is|[Nn]ame:|[Rr]ecipient:?|[Cc]ontact:?|[Cc]all me)\s+[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?/g,
    (placeholder, label) => `${label} ${placeholder}`,
  ],
  ['address', new RegExp(`(收货地址|地址|寄到|送到|发到)\\s*[:：]?\\s*[^，。！？,!?\\n]{4,60}`, 'g'), keepLabel],
  [
    'address',
    new RegExp(
      `(?:[${han}]{2,8}(?:省|自治区))?[${han}]{2,8}(?:市|州|盟)[${han}]{1,8}(?:区|县|旗|镇)[${han}\\d]{0,20}?(?:路|街|道|巷|弄|村|小区|大厦|花园|公寓)(?:[\\dA-Za-z-]+号)?(?:[${han}A-Za-z\\d]{0,10}?[\\dA-Za-z]+(?:号楼|栋|幢|单元|室|楼|层|号))*`,
      'g',
    ),
    whole,
  ],
  [
    'address',
    /\b(?:(?:Room|Rm\.?|Apt\.?|Unit|No\.)\s*\d+[A-Za-z]?,?\s+)?\d+[A-Za-z]?\s+(?:[A-Z][a-z]+\s){1,3}(?:Road|Rd\.?|Street|St\.?|Avenue|Ave\.?|Lane|Ln\.?|Boulevard|Blvd\.?)(?:,\s*[A-Z][a-z]+(?:\s[A-Z][a-z]+)*){0,3}/g,
    whole,
  ],
];

export function redactPersonalData(text: string): RedactionResult {
  const counts: Partial<Record<RedactionKind, number>> = {};
  let result = text;
  for (const [kind, pattern, replace] of rules) {
    result = result.replace(pattern, (...match: unknown[]) => {
      counts[kind] = (counts[kind] ?? 0) + 1;
      const groups = match.slice(1, -2).map((group) => (typeof group === 'string' ? group : ''));
      return replace(redactionPlaceholders[kind], ...groups);
    });
  }
  return { text: result, counts };
}
