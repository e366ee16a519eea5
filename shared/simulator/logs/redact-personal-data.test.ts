import { redactPersonalData } from './redact-personal-data';

describe('redactPersonalData', () => {
  it.each([
    [
      '我叫王小明，电话13812345678，收货地址：上海市浦东新区张江路88号3栋1201室，什么时候到',
      '我叫[NAME]，电话[PHONE]，收货地址[ADDRESS]，什么时候到',
    ],
    ['手机 +86 138 1234 5678 订单号：3021456789012345678 还没发货', '手机 [PHONE] 订单号[ORDER_NO] 还没发货'],
    ['138-1234-5678 帮我查下物流', '[PHONE] 帮我查下物流'],
    ['+8613912345678能加微信吗', '[PHONE]能加微信吗'],
    ['座机010-62345678也行', '座机[PHONE]也行'],
    ['我的身份证号是11010519900307123X，能开发票吗', '我的身份证号是[ID_NUMBER]，能开发票吗'],
    ['单号 2024061800012345678 怎么还没到', '单号[ORDER_NO] 怎么还没到'],
    ['北京市朝阳区建国路88号SOHO现代城5号楼可以送吗', '[ADDRESS]可以送吗'],
    ['寄到广东省深圳市南山区科技园路1号腾讯大厦，谢谢', '寄到[ADDRESS]，谢谢'],
    ['收件人：李四 联系人 赵五六', '收件人[NAME] 联系人[NAME]'],
    [
      'my name is John Smith, phone +86 13912345678, email john.smith@example.com',
      'my name is [NAME], phone [PHONE], email [EMAIL]',
    ],
    [
      'Please ship to Room 1203, 88 Zhangjiang Road, Pudong, Shanghai. order #A1234567',
      'Please ship to [ADDRESS]. order #[ORDER_NO]',
    ],
    ['Call me at 021-55556666 or +86-139-0000-1111', 'Call me at [PHONE] or [PHONE]'],
  ])('%s', (input, expected) => {
    expect(redactPersonalData(input).text).toBe(expected);
  });

  it('leaves ordinary shopping questions untouched', () => {
    for (const text of [
      '新疆包邮吗',
      '3号链接多少钱',
      '我在上海，能发货吗',
      '170 130斤穿什么码',
      '买2件到手多少钱',
      '主播是真人吗',
      '满300减50能叠加吗',
      'iPhone 15 有吗',
    ]) {
      expect(redactPersonalData(text)).toEqual({ text, counts: {} });
    }
  });

  it('counts what it removed', () => {
    expect(redactPersonalData('电话13812345678或13987654321，邮箱a@b.cn').counts).toEqual({ email: 1, phone: 2 });
  });
});
