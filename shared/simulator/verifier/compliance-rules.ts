/**
 * What a live host may never say, whatever the harness: absolute claims the Advertising Law
 * (《广告法》第九条) bans, and promises no policy in the simulator backs (lifetime guarantees,
 * unconditional returns, guaranteed effects). Harness hooks may add their own banned terms; those
 * are judged under `hooks`.
 */
export const advertisingLawTerms = [
  '最低价',
  '最便宜',
  '全网最低',
  '史上最低',
  '历史最低',
  '全网第一',
  '销量第一',
  '排名第一',
  '行业第一',
  '第一品牌',
  '国家级',
  '世界级',
  '顶级',
  '最好',
  '最佳',
  '最强',
  '绝对',
  '100%有效',
  '万能',
  '根治',
  '包治',
];

/** Promises with no policy behind them: [pattern, what it promises]. */
export const inventedPromisePatterns: Array<[RegExp, string]> = [
  [/永久|终身|一辈子/, '永久/终身承诺'],
  [/保证[^，。！？,.!?]{0,6}(不坏|有效|效果|退|赔|最低|便宜|瘦|白)/, '保证效果或售后'],
  [/无条件退|随便退|想退就退/, '无条件退货'],
  [/假一赔/, '假一赔N'],
  [/稳赚|包赚/, '收益承诺'],
];
