/**
 * Python-style `strftime` for chat templates (`strftime_now("%d %b %Y")` in Llama 3.x and
 * others). Written by hand because @huggingface/jinja's built-in formats with the host's local
 * time zone and locale, so the same conversation would render differently on two workers; this
 * one always uses UTC and English names, the C locale Python uses by default.
 */
const weekdayNames = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const monthNames = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];

function pad(value: number, width = 2): string {
  return String(value).padStart(width, '0');
}

function dayOfYear(date: Date): number {
  const startOfYear = Date.UTC(date.getUTCFullYear(), 0, 1);
  return Math.floor((date.getTime() - startOfYear) / 86_400_000) + 1;
}

/** Formats `date` in UTC; directives it does not know are left as written. */
export function strftime(date: Date, format: string): string {
  return format.replace(/%[aAbBdeHIjmMpSyYzZ%]/g, (directive) => {
    const hours = date.getUTCHours();
    switch (directive) {
      case '%a':
        return weekdayNames[date.getUTCDay()].slice(0, 3);
      case '%A':
        return weekdayNames[date.getUTCDay()];
      case '%b':
        return monthNames[date.getUTCMonth()].slice(0, 3);
      case '%B':
        return monthNames[date.getUTCMonth()];
      case '%d':
        return pad(date.getUTCDate());
      case '%e':
        return String(date.getUTCDate()).padStart(2, ' ');
      case '%H':
        return pad(hours);
      case '%I':
        return pad(hours % 12 === 0 ? 12 : hours % 12);
      case '%j':
        return pad(dayOfYear(date), 3);
      case '%m':
        return pad(date.getUTCMonth() + 1);
      case '%M':
        return pad(date.getUTCMinutes());
      case '%p':
        return hours < 12 ? 'AM' : 'PM';
      case '%S':
        return pad(date.getUTCSeconds());
      case '%y':
        return pad(date.getUTCFullYear() % 100);
      case '%Y':
        return String(date.getUTCFullYear());
      case '%z':
        return '+0000';
      case '%Z':
        return 'UTC';
      default:
        return '%';
    }
  });
}
