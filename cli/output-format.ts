/**
 * How `list`, `get` and `tokens list` print what they fetched: for a
 * script, one JSON object a line (`ndjson`, the default when stdout is not
 * a terminal) or one JSON document (`json`); for a person, an aligned
 * table (`table`, the default on a terminal) or one with every field
 * (`wide`). Chosen with `-o`; `--json` is `-o ndjson`.
 */
import { CliUsageError } from './exit-codes.js';
import type { Output } from './streams.js';

export const OUTPUT_FORMATS = ['json', 'ndjson', 'table', 'wide'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** The format of `-o`, `--json` and where stdout goes; `-o table` or `wide` with `--json` is a usage error. */
export function resolveOutput(option: string | undefined, json: boolean, stdoutIsTty: boolean): OutputFormat {
  if (option === undefined) return json || !stdoutIsTty ? 'ndjson' : 'table';
  if (!(OUTPUT_FORMATS as readonly string[]).includes(option))
    throw new CliUsageError(`-o: give one of ${OUTPUT_FORMATS.join(', ')}, not ${JSON.stringify(option)}`);
  if (json && (option === 'table' || option === 'wide'))
    throw new CliUsageError(`--json and -o ${option} contradict each other: --json is -o ndjson`);
  return option as OutputFormat;
}

/** A table column: its header and the cell of a record. */
interface Column<T> {
  header: string;
  cell(record: T): unknown;
}

/** How records of one kind print in each format. */
export interface View<T> {
  /** The record's line of JSON (ndjson) and its element (json). */
  json(record: T): string;
  /** The table's columns. */
  columns: readonly Column<T>[];
  /** `wide`: the fields whose keys no column shows get a column each, named by key, in order of first appearance. */
  fields(record: T): Record<string, unknown>;
  /** Keys of `fields` that the columns already show. */
  shown: readonly string[];
}

/** Prints records as they come (ndjson, json) or all at the end (the tables, which align on every row). */
export interface Listing<T> {
  add(records: readonly T[]): Promise<void>;
  end(): Promise<void>;
}

/** Longest cell of `table` (`wide` shows whole cells). */
const MAX_CELL = 40;

/**
 * A listing of `view` on `out`. `single`: `-o json` prints the one
 * record as it is rather than in an array (`get` of one ref). `bold`:
 * the table's header in bold (a terminal without NO_COLOR).
 */
export function listing<T>(
  out: Output,
  format: OutputFormat,
  view: View<T>,
  options: { single?: boolean; bold?: boolean } = {},
): Listing<T> {
  if (format === 'ndjson')
    return { add: (records) => out.write(records.map((r) => view.json(r) + '\n').join('')), end: async () => {} };
  if (format === 'json') return jsonListing(out, view, options.single === true);
  const rows: T[] = [];
  return {
    add: async (records) => void rows.push(...records),
    end: () => out.write(table(rows, view, format === 'wide', options.bold === true)),
  };
}

function jsonListing<T>(out: Output, view: View<T>, single: boolean): Listing<T> {
  let count = 0;
  if (single)
    return { add: (records) => out.write(records.map((r) => view.json(r) + '\n').join('')), end: async () => {} };
  return {
    add: async (records) => {
      for (const record of records) await out.write(`${count++ === 0 ? '[' : ','}\n${view.json(record)}`);
    },
    end: () => out.write(count === 0 ? '[]\n' : '\n]\n'),
  };
}

/** The rows of `records` as an aligned table: a header, then a line each, two spaces between columns. */
function table<T>(records: readonly T[], view: View<T>, wide: boolean, bold: boolean): string {
  const columns: Column<T>[] = [...view.columns];
  if (wide) {
    const keys = new Set<string>();
    for (const record of records)
      for (const key of Object.keys(view.fields(record))) if (!view.shown.includes(key)) keys.add(key);
    for (const key of keys)
      columns.push({
        header: key.replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase(),
        cell: (record) => view.fields(record)[key],
      });
  }
  const cells = records.map((record) =>
    columns.map((column) => cellText(column.cell(record), wide ? Infinity : MAX_CELL)),
  );
  const headers = columns.map((column) => column.header);
  const widths = headers.map((header, i) => Math.max(header.length, ...cells.map((row) => row[i]!.length)));
  const line = (row: readonly string[]) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd() + '\n';
  const head = line(headers);
  return (bold ? `\x1b[1m${head.slice(0, -1)}\x1b[0m\n` : head) + cells.map(line).join('');
}

/**
 * Characters a terminal would act on rather than show: C0 and C1 controls, and the bidirectional overrides and
 * isolates.
 */
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/**
 * A value as a table shows it: a string as it is, anything else as JSON,
 * none as `-`; what a terminal would act on escaped as in JSON (a user's
 * name cannot move the cursor or recolour the screen), and at most `max`
 * characters, the cut marked with `…`.
 */
export function cellText(value: unknown, max: number): string {
  if (value === undefined || value === null) return '-';
  const text = (typeof value === 'string' ? value : JSON.stringify(value)).replace(
    UNPRINTABLE,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
