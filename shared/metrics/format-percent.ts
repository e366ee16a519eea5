/**
 * A share (0–1) as a percentage with `digits` decimals, except that rounding never hides a
 * shortfall or a presence: 99.995% is not shown as "100.0%" nor 0.004% as "0.0%". Such values get
 * as many more decimals as they need (up to 6), so a 99.995% acceptance rate reads "99.995%".
 */
export function formatPercent(share: number, digits = 1): string {
  if (!Number.isFinite(share)) return '–';
  const percent = share * 100;
  let places = digits;
  let text = percent.toFixed(places);
  while (places < 6 && ((percent < 100 && Number(text) >= 100) || (percent > 0 && Number(text) <= 0))) {
    places += 1;
    text = percent.toFixed(places);
  }
  if (percent < 100 && Number(text) >= 100) return `>${(100 - 10 ** -places).toFixed(places)}%`.replace(/^>/, '<');
  if (percent > 0 && Number(text) <= 0) return `<${(10 ** -places).toFixed(places)}%`;
  return `${text}%`;
}
