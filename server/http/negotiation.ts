/**
 * Content negotiation on the Accept field (RFC 9110 section 12.5.1), only as
 * far as GET / needs it: does the client prefer an HTML page to JSON?
 */

// RFC 9110 section 12.4.2: qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
const QVALUE = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/;
// RFC 9110 section 5.6.2: token = 1*tchar
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

interface MediaRange {
  type: string;
  subtype: string;
  q: number;
}

/**
 * The media ranges of an Accept field value, lower-cased, with their
 * weights. A range that is not `type/subtype` or whose `q` is not a valid
 * qvalue is dropped: it cannot be honoured, so it does not count for either
 * side. Parameters other than `q` are ignored.
 */
function parseAccept(field: string): MediaRange[] {
  const ranges: MediaRange[] = [];
  for (const element of field.split(',')) {
    const [range, ...parameters] = element.split(';');
    const slash = range!.indexOf('/');
    if (slash === -1) continue;
    const type = range!.slice(0, slash).trim().toLowerCase();
    const subtype = range!
      .slice(slash + 1)
      .trim()
      .toLowerCase();
    if (!TOKEN.test(type) || !TOKEN.test(subtype) || (type === '*' && subtype !== '*')) continue;
    let q = 1;
    let valid = true;
    for (const parameter of parameters) {
      const eq = parameter.indexOf('=');
      if (eq === -1 || parameter.slice(0, eq).trim().toLowerCase() !== 'q') continue;
      const value = parameter.slice(eq + 1).trim();
      valid = QVALUE.test(value);
      q = Number(value);
      break;
    }
    if (valid) ranges.push({ type, subtype, q });
  }
  return ranges;
}

// The weight the ranges give to type/subtype: that of the most specific
// matching range (type/subtype, then type/*, then the wildcard; the first of
// equals), 0 when none matches (RFC 9110 section 12.5.1).
function weight(ranges: readonly MediaRange[], type: string, subtype: string): number {
  let best = -1;
  let q = 0;
  for (const range of ranges) {
    const specificity =
      range.type === type && range.subtype === subtype
        ? 2
        : range.type === type && range.subtype === '*'
          ? 1
          : range.type === '*'
            ? 0
            : -1;
    if (specificity > best) {
      best = specificity;
      q = range.q;
    }
  }
  return q;
}

/**
 * True when the Accept field weighs `text/html` above `application/json`
 * (and above 0). A tie goes to JSON, the API's own type, so a lone wildcard
 * range and a missing Accept get JSON, while a browser's Accept (HTML at 1,
 * the wildcard at 0.8) gets HTML.
 */
export function prefersHtml(field: string | undefined): boolean {
  if (field === undefined) return false;
  const ranges = parseAccept(field);
  const html = weight(ranges, 'text', 'html');
  return html > 0 && html > weight(ranges, 'application', 'json');
}
