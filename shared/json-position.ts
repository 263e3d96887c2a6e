/**
 * Where a JSON text stops being JSON, as a person finds it in an editor:
 * "line L, column C", from the position V8's JSON.parse names in its
 * message ("... at position N", or Node 22's "(line L column C)").
 */
export function jsonErrorPlace(text: string, error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const lineColumn = /\(line (\d+) column (\d+)\)/.exec(message);
  if (lineColumn !== null) return `line ${lineColumn[1]}, column ${lineColumn[2]}`;
  const position = /at position (\d+)/.exec(message);
  const at = position === null ? firstBadIndex(text) : Number(position[1]);
  const before = text.slice(0, at).split('\n');
  return `line ${before.length}, column ${before.at(-1)!.length + 1}`;
}

/** JSON.parse's reason without its position, for a sentence of our own. */
export function jsonErrorReason(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  // V8 quotes a piece of the text ('Unexpected token 'b', "{"name": bad}" is not valid JSON'): the place says where,
  // the piece is left out.
  return message
    .replace(/, ".*" is not valid JSON$/s, '')
    .replace(/,? ?(\(line \d+ column \d+\)|at position \d+)/, '')
    .replace(/ in JSON$/, '')
    .replace(/\s+/g, ' ')
    .trim();
}

/**
 * Where JSON.parse gave no position (Node 20 on an unexpected token): the
 * length of the longest prefix that could still begin a JSON text, found
 * by halving (a prefix of such a prefix is one too).
 */
function firstBadIndex(text: string): number {
  let good = 0;
  let bad = text.length;
  while (good < bad) {
    const mid = Math.ceil((good + bad) / 2);
    if (couldContinue(text.slice(0, mid))) good = mid;
    else bad = mid - 1;
  }
  return good;
}

/** True when `prefix` is JSON, or fails only for ending too soon. */
function couldContinue(prefix: string): boolean {
  try {
    JSON.parse(prefix);
    return true;
  } catch (error) {
    const message = (error as Error).message;
    const position = /at position (\d+)/.exec(message);
    return (
      /end of JSON input|Unterminated/.test(message) || (position !== null && Number(position[1]) >= prefix.length)
    );
  }
}
