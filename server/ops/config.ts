import { jsonErrorPlace, jsonErrorReason } from '../../shared/json-position.js';
import { parseLifetime } from '../../shared/endpoints.js';
import { fileProblem } from '../../shared/file-errors.js';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { flagUsageError, ServerUsageError } from '../errors.js';

export type RequireSession = 'none' | 'writes' | 'all';
type LogFormat = 'text' | 'json' | 'off';

export interface Config {
  host: string;
  port: number;
  data: string;
  /** Seconds a reservation stays live. */
  reservationTtl: number;
  /** Seconds a session stays valid. */
  sessionTtl: number;
  allowIdChange: boolean;
  requireSession: RequireSession;
  requireIfMatch: boolean;
  maxBody: number;
  maxReservations: number;
  cookieSecure: boolean;
  /**
   * `journal` (durable, in the data directory; the default), `memory` (gone
   * on exit), `postgres` (the database of the PG* variables) or a
   * `postgres://` connection string.
   */
  store: string;
  /** Connections in the PostgreSQL pool. */
  dbPool: number;
  /** Seconds a database statement or connection attempt may take. */
  dbTimeout: number;
  /** Seconds to keep trying to reach the database at start. */
  dbStartWait: number;
  /** Journal bytes below which no compaction starts. */
  compactionFloor: number;
  /** Seconds a change stays in the feed of changes (GET /changes). */
  changesRetention: number;
  /** Signing secrets, first signs, all verify; empty means "generate one in the data directory". */
  secrets: string[];
  /** Where the secrets came from when from a file (--secret-file): read at start. */
  secretFile: string;
  /** Requests per second per client address (token bucket refill); 0 turns rate limiting off. */
  rateLimit: number;
  /** Bucket size: requests a client may make at once; 0 means "equal to rateLimit". */
  rateBurst: number;
  /** Take the client address from the last X-Forwarded-For entry (set by the proxy in front). */
  trustProxy: boolean;
  /** Names a request's Host may give besides the listening address and loopback names, lower case; `*` allows any. */
  allowedHosts: string[];
  /** Open connections one client address (IPv6: one /64) may hold; 0: no limit. Off behind --trust-proxy. */
  maxConnectionsPerClient: number;
  /** 0: from the open-files limit (http/connection-limits.ts). */
  maxConnections: number;
  /** The access log on stdout: one line per request as text or JSON, or none. */
  logFormat: LogFormat;
  /** Serve the browser sign-in page at GET /login and send browsers without a session there from GET /. */
  loginPage: boolean;
  /** --no-console: no admin console at /console (it answers 404). */
  noConsole: boolean;
  /** log2 of scrypt's N for passwords hashed by this process (the admin's, the decoy's). */
  passwordCost: number;
  /** Password hashes computed at once; more logins wait in a short queue, then are refused 503. */
  loginConcurrency: number;
  /** Failed logins a minute, server-wide, before logins without a session are refused 503; 0: no budget. */
  loginFailuresPerMinute: number;
  /** The settings file (--config), '' for none. */
  configFile: string;
  /** HTTPS: the certificate chain and key files (PEM), '' for plain HTTP. */
  tlsCert: string;
  tlsKey: string;
}

interface FlagSpec {
  type: 'string' | 'boolean';
  default: string | boolean;
  description: string;
  /** `source` names where the value came from for messages: the flag (`--port`) or the variable (`USERS_PORT`). */
  parse: (value: string | boolean, source: string) => unknown;
  key: keyof Config;
}

const MIN_SECRET_BYTES = 32;
const MAX_RATE = 1_000_000;

function integer(min: number, max: number) {
  return (value: string | boolean, source: string): number => {
    const text = String(value);
    const n = /^\d+$/.test(text) ? Number(text) : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      throw new ServerUsageError(`${source} must be an integer from ${min} to ${max}, not "${text}"`);
    }
    return n;
  };
}

function text(value: string | boolean, source: string): string {
  const s = String(value);
  if (s === '') throw new ServerUsageError(`${source} must not be empty`);
  return s;
}

/**
 * `--allowed-hosts`: host names and addresses without a port (any port is
 * accepted), lower-cased; a bare IPv6 address is bracketed as Host writes it.
 */
function parseAllowedHosts(value: string | boolean, source: string): string[] {
  if (value === '') return [];
  return String(value)
    .split(',')
    .map((entry) => {
      const name = entry.trim().toLowerCase();
      if (name === '*' || REG_NAME.test(name)) return name;
      const address = name.startsWith('[') && name.endsWith(']') ? name.slice(1, -1) : name;
      if (isIP(address) === 6) return `[${address}]`;
      throw new ServerUsageError(
        `${source}: "${entry.trim()}" is not a host name or address (give each without a scheme or port; any port is accepted), or * for any`,
      );
    });
}

// RFC 3986 section 3.2.2: a reg-name or IPv4 address (unreserved and sub-delims; no port, no percent-encoding).
const REG_NAME = /^[0-9a-z._~!$&'()*+;=-]+$/;

/** Every server flag, its default and its environment variable (USERS_ + name). */
export const FLAGS: Record<string, FlagSpec> = {
  host: { type: 'string', default: '127.0.0.1', description: 'address to listen on', key: 'host', parse: text },
  port: {
    type: 'string',
    default: '8080',
    description: 'port to listen on (0: any free port)',
    key: 'port',
    parse: integer(0, 65535),
  },
  data: { type: 'string', default: './data', description: 'data directory', key: 'data', parse: text },
  'reservation-ttl': {
    type: 'string',
    default: '300',
    description: 'seconds a reserved id stays reserved',
    key: 'reservationTtl',
    parse: integer(1, 31_536_000),
  },
  'session-ttl': {
    type: 'string',
    default: '43200',
    description: 'seconds a session stays valid',
    key: 'sessionTtl',
    parse: integer(1, 31_536_000),
  },
  'allow-id-change': {
    type: 'boolean',
    default: false,
    description: 'let a PUT body move a user to a new id',
    key: 'allowIdChange',
    parse: (v) => v,
  },
  'require-session': {
    type: 'string',
    default: 'all',
    description: 'all, writes or none: which requests of /users, /changes and /metrics need a session or API token',
    key: 'requireSession',
    parse: (v, source) => {
      if (v === 'none' || v === 'writes' || v === 'all') return v;
      throw new ServerUsageError(`${source} must be all, writes or none, not "${String(v)}"`);
    },
  },
  'require-if-match': {
    type: 'boolean',
    default: false,
    description: 'refuse PUT and DELETE of an existing user without If-Match (428)',
    key: 'requireIfMatch',
    parse: (v) => v,
  },
  'max-body': {
    type: 'string',
    default: '16384',
    description: 'largest request body in bytes',
    key: 'maxBody',
    parse: integer(2, 64 * 1024 * 1024),
  },
  'max-reservations': {
    type: 'string',
    default: '100000',
    description: 'most live reservations at once',
    key: 'maxReservations',
    parse: integer(1, 100_000_000),
  },
  store: {
    type: 'string',
    default: 'journal',
    description: 'journal (durable, in --data), memory (lost on exit), postgres or postgres://...',
    key: 'store',
    parse: (v, source) => {
      const text = String(v);
      if (text === 'journal' || text === 'memory' || text === 'postgres' || /^postgres(ql)?:\/\//.test(text))
        return text;
      throw new ServerUsageError(
        `${source} must be journal, memory, postgres or a postgres:// URL, not "${redactSecrets(text)}"`,
      );
    },
  },
  'db-pool': {
    type: 'string',
    default: '10',
    description: 'PostgreSQL connections per instance (up to twice that for a moment when the pool is replaced)',
    key: 'dbPool',
    parse: integer(1, 1000),
  },
  'db-timeout': {
    type: 'string',
    default: '5',
    description: 'seconds a PostgreSQL statement may take (a new connection: at most 0.9)',
    key: 'dbTimeout',
    parse: integer(1, 300),
  },
  'db-start-wait': {
    type: 'string',
    default: '30',
    description: 'seconds to keep trying to reach PostgreSQL at start',
    key: 'dbStartWait',
    parse: integer(0, 3600),
  },
  'changes-retention': {
    type: 'string',
    default: '1h',
    description: 'how long the feed of changes keeps a change: 90s, 30m, 1h, 7d, 2w',
    key: 'changesRetention',
    parse: (v, source) => {
      const seconds = parseLifetime(String(v));
      if (seconds === undefined || seconds > 366 * 86_400)
        throw new ServerUsageError(
          `${source} must be a duration such as 90s, 30m, 1h, 7d or 2w (at most a year), not "${String(v)}"`,
        );
      return seconds;
    },
  },
  'compaction-floor': {
    type: 'string',
    default: String(8 * 1024 * 1024),
    description: 'journal bytes before compaction is considered',
    key: 'compactionFloor',
    parse: integer(4096, 2 ** 40),
  },
  'rate-limit': {
    type: 'string',
    default: '0',
    description: 'requests per second per client address (0: no limit)',
    key: 'rateLimit',
    parse: integer(0, MAX_RATE),
  },
  'rate-burst': {
    type: 'string',
    default: '0',
    description: 'requests a client may make at once (0: same as --rate-limit)',
    key: 'rateBurst',
    parse: integer(0, MAX_RATE),
  },
  'max-connections': {
    type: 'string',
    default: '0',
    description:
      'open connections at most; past it the newest of the address holding the most is closed (0: the open-files limit less 256, up to 10000)',
    key: 'maxConnections',
    parse: integer(0, 1_000_000),
  },
  'max-connections-per-client': {
    type: 'string',
    default: '0',
    description: 'open connections per client address, IPv6 per /64 (0: no limit; not applied with --trust-proxy)',
    key: 'maxConnectionsPerClient',
    parse: integer(0, 1_000_000),
  },
  'trust-proxy': {
    type: 'boolean',
    default: false,
    description: 'client address from the last X-Forwarded-For entry (behind a proxy)',
    key: 'trustProxy',
    parse: (v) => v,
  },
  'allowed-hosts': {
    type: 'string',
    default: '',
    description:
      'comma-separated names clients may give in Host besides the listening address and loopback names (*: any)',
    key: 'allowedHosts',
    parse: parseAllowedHosts,
  },
  'log-format': {
    type: 'string',
    default: 'text',
    description: 'access log on stdout, one line per request: text, json or off',
    key: 'logFormat',
    parse: (v, source) => {
      if (v === 'text' || v === 'json' || v === 'off') return v;
      throw new ServerUsageError(`${source} must be text, json or off, not "${String(v)}"`);
    },
  },
  'login-page': {
    type: 'boolean',
    default: false,
    description: 'browser sign-in page at /login; GET / sends browsers there',
    key: 'loginPage',
    parse: (v) => v,
  },
  'no-console': {
    type: 'boolean',
    default: false,
    description: 'serve no admin console at /console (it answers 404)',
    key: 'noConsole',
    parse: (v) => v,
  },
  'password-cost': {
    type: 'string',
    default: '15',
    description: 'log2 of scrypt N for password hashes; lower only for tests',
    key: 'passwordCost',
    parse: integer(1, 20),
  },
  'login-concurrency': {
    type: 'string',
    default: '2',
    description: 'password hashes computed at once (16 more wait, at most 4 per client address; the rest get 503)',
    key: 'loginConcurrency',
    parse: integer(1, 64),
  },
  'login-failures-per-minute': {
    type: 'string',
    default: '600',
    description:
      'failed logins a minute server-wide before logins without a session of their account get 503, at most a tenth of them per client address (0: no limit)',
    key: 'loginFailuresPerMinute',
    parse: integer(0, 1_000_000),
  },
  'cookie-secure': {
    type: 'boolean',
    default: false,
    description: 'name the session cookie __Host-USER_TOKEN and mark it Secure (behind TLS)',
    key: 'cookieSecure',
    parse: (v) => v,
  },
  secret: {
    type: 'string',
    default: '',
    description: 'comma-separated signing secrets, 32+ bytes each; the first signs',
    key: 'secrets',
    parse: (v, source) => {
      if (v === '') return [];
      const secrets = String(v).split(',');
      for (const s of secrets) {
        if (Buffer.byteLength(s) < MIN_SECRET_BYTES)
          throw new ServerUsageError(`${source}: each secret needs at least ${MIN_SECRET_BYTES} bytes`);
      }
      return secrets;
    },
  },
  'tls-cert': {
    type: 'string',
    default: '',
    description: 'serve HTTPS with this PEM certificate chain (with --tls-key; implies --cookie-secure)',
    key: 'tlsCert',
    parse: (v) => String(v),
  },
  'tls-key': {
    type: 'string',
    default: '',
    description: 'the PEM private key of --tls-cert; both are read again on SIGHUP',
    key: 'tlsKey',
    parse: (v) => String(v),
  },
  'secret-file': {
    type: 'string',
    default: '',
    description: 'file of signing secrets, one a line, the first signs (instead of --secret)',
    key: 'secretFile',
    parse: (v) => String(v),
  },
  config: {
    type: 'string',
    default: '',
    description: 'JSON file of settings named like these flags; flags and variables win',
    key: 'configFile',
    parse: (v) => String(v),
  },
};

/** `--password-cost` from the environment alone, for the commands that hash without the server's flags. */
export function passwordCostFrom(env: NodeJS.ProcessEnv): number {
  const spec = FLAGS['password-cost']!;
  return spec.parse(env[envName('password-cost')] ?? spec.default, envName('password-cost')) as number;
}

/** A value with the password of any URL in it replaced by `***`: what messages may show. */
export function redactSecrets(text: string): string {
  return text.replace(/(\/\/[^:@/\s]*):[^@/\s]*@/g, '$1:***@');
}

/** True when `--store` names a PostgreSQL database. */
export function isPostgresStore(store: string): boolean {
  return store === 'postgres' || /^postgres(ql)?:\/\//.test(store);
}

export function envName(flag: string): string {
  return 'USERS_' + flag.toUpperCase().replaceAll('-', '_');
}

function parseBooleanEnv(value: string, name: string): boolean {
  const v = value.toLowerCase();
  if (v === '1' || v === 'true' || v === 'yes' || v === 'on') return true;
  if (v === '0' || v === 'false' || v === 'no' || v === 'off' || v === '') return false;
  throw new ServerUsageError(`${name} must be true or false, not "${value}"`);
}

interface ParsedCommandLine {
  config: Config;
  /** Where each flag's value came from: `--port`, `USERS_PORT`, `FILE: "port"` or `default`. */
  sources: Record<string, string>;
  help: boolean;
  version: boolean;
}

/** The commands of the executable besides serving (server/main.ts runs them), as a usage error lists them. */
export const SERVER_COMMANDS = [
  'accounts',
  'backup',
  'config',
  'copy',
  'index',
  'migrate',
  'repair',
  'schema',
] as const;

/**
 * Parses the server's flags. Precedence: flag, then USERS_* environment
 * variable, then the --config file, then the embedded default. Throws ServerUsageError on any bad flag or value.
 */
export function parseConfig(argv: readonly string[], env: NodeJS.ProcessEnv): ParsedCommandLine {
  const options: ParseArgsConfig['options'] = { help: { type: 'boolean', short: 'h' }, version: { type: 'boolean' } };
  for (const [flag, spec] of Object.entries(FLAGS)) options[flag] = { type: spec.type };
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }) as {
      values: Record<string, string | boolean | undefined>;
    });
  } catch (error) {
    throw flagUsageError(error, SERVER_COMMANDS);
  }
  const configFile = values.config ?? env[envName('config')] ?? '';
  const fromFile = configFile === '' ? {} : readConfigFile(String(configFile));
  const config: Record<string, unknown> = {};
  const sources: Record<string, string> = {};
  for (const [flag, spec] of Object.entries(FLAGS)) {
    // Flags, then variables, then the file, then the default. A bad value
    // is named where it came from.
    let raw: string | boolean = spec.default;
    let source = 'default';
    const fromEnv = env[envName(flag)];
    if (values[flag] !== undefined) {
      raw = values[flag]!;
      source = `--${flag}`;
    } else if (fromEnv !== undefined) {
      raw = spec.type === 'boolean' ? parseBooleanEnv(fromEnv, envName(flag)) : fromEnv;
      source = envName(flag);
    } else if (flag in fromFile) {
      raw = fromFile[flag]!;
      source = `${configFile}: "${flag}"`;
    }
    config[spec.key] = spec.parse(raw, source === 'default' ? `--${flag}` : source);
    sources[flag] = source;
  }
  // A burst without a rate is a setup mistake, not a silent no-op.
  if (config.rateBurst !== 0 && config.rateLimit === 0) throw new ServerUsageError('--rate-burst needs --rate-limit');
  if ((config.tlsCert === '') !== (config.tlsKey === ''))
    throw new ServerUsageError('HTTPS needs both --tls-cert and --tls-key');
  // Served over TLS, the session cookie can be Secure and __Host- prefixed.
  if (config.tlsCert !== '') config.cookieSecure = true;
  if (config.secretFile !== '') {
    if ((config.secrets as string[]).length > 0)
      throw new ServerUsageError('give the signing secrets once: --secret or --secret-file, not both');
    config.secrets = readSecretFile(config.secretFile as string);
  }
  return { config: config as unknown as Config, sources, help: values.help === true, version: values.version === true };
}

/**
 * `--config FILE`: a JSON object whose keys are flag names without their
 * dashes (`"port": 8081`, `"require-session": "writes"`). A key no flag has
 * is refused by name, so a typo is not silently ignored.
 */
function readConfigFile(path: string): Record<string, string | boolean> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ServerUsageError(`--config: ${fileProblem('read', path, error)}`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (error) {
    throw new ServerUsageError(
      `--config ${path}: not JSON at ${jsonErrorPlace(text, error)} (${jsonErrorReason(error)})`,
    );
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    throw new ServerUsageError(`--config ${path}: the settings must be a JSON object`);
  const settings: Record<string, string | boolean> = {};
  for (const [key, value] of Object.entries(doc)) {
    const spec = FLAGS[key];
    if (spec === undefined || key === 'config')
      throw new ServerUsageError(
        `--config ${path}: unknown setting "${key}" (the settings are named like the flags, without --)`,
      );
    if (spec.type === 'boolean' ? typeof value !== 'boolean' : typeof value !== 'string' && typeof value !== 'number') {
      throw new ServerUsageError(
        `--config ${path}: "${key}" must be ${spec.type === 'boolean' ? 'true or false' : 'a string or a number'}`,
      );
    }
    settings[key] = typeof value === 'number' ? String(value) : (value as string | boolean);
  }
  return settings;
}

/** `--secret-file`: one secret a line, the first signs; blank lines and lines starting with # are skipped. */
function readSecretFile(path: string): string[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ServerUsageError(`--secret-file: ${fileProblem('read', path, error)}`);
  }
  const secrets = text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  if (secrets.length === 0)
    throw new ServerUsageError(`--secret-file ${path}: no secret in it (one a line, the first signs)`);
  for (const secret of secrets)
    if (Buffer.byteLength(secret) < MIN_SECRET_BYTES)
      throw new ServerUsageError(`--secret-file ${path}: each secret needs at least ${MIN_SECRET_BYTES} bytes`);
  return secrets;
}

/** The effective settings, one a line with where each came from; secrets and database passwords shown as ***. */
export function describeSettings(parsed: ParsedCommandLine): string {
  const lines: string[] = [];
  for (const [flag, spec] of Object.entries(FLAGS)) {
    const value = (parsed.config as unknown as Record<string, unknown>)[spec.key];
    let shown = Array.isArray(value) ? value.join(',') : String(value);
    if (flag === 'secret') shown = value === undefined || (value as string[]).length === 0 ? '' : '***';
    if (flag === 'store') shown = redactSecrets(shown);
    lines.push(`${flag} = ${shown === '' ? '(none)' : shown}   (${parsed.sources[flag]})`);
  }
  if (parsed.config.secretFile !== '')
    lines.push(`# the signing secrets (${parsed.config.secrets.length}) come from ${parsed.config.secretFile}`);
  return lines.join('\n');
}

/**
 * Every flag as the help and the man page list it: its name with a value placeholder, variable, default and
 * description.
 */
export function flagTable(): { name: string; env: string; default: string; description: string }[] {
  return Object.entries(FLAGS).map(([flag, spec]) => ({
    name: spec.type === 'boolean' ? `--${flag}` : `--${flag} ${spec.default === '' ? 'S' : 'N'}`,
    env: envName(flag),
    default: spec.type === 'boolean' ? 'off' : spec.default === '' ? '(none)' : String(spec.default),
    description: spec.description,
  }));
}

export function usage(): string {
  const lines = [
    'usage: users-server [flags]',
    '       users-server accounts add|passwd|role|remove|list NAME ...',
    '       users-server repair [--data DIR]',
    '       users-server migrate [--store URL]',
    '       users-server copy --from DIR|URL --to URL|DIR [--replace]',
    '       users-server backup --data DIR --to DEST',
    '       users-server config --show [flags]',
    '       users-server index add|remove|list PATH ...',
    '       users-server schema set FILE|show|remove ...',
    '       users-server --help | --version',
    '',
    'flags (each also from the environment variable named after it):',
  ];
  for (const [flag, spec] of Object.entries(FLAGS)) {
    const name = spec.type === 'boolean' ? `--${flag}` : `--${flag} ${spec.default === '' ? 'S' : spec.default}`;
    // A name too long for its column goes on a line of its own.
    if (name.length > 26) lines.push(`  ${name}`);
    lines.push(
      ...wrapped(`${spec.description}; ${envName(flag)}`, name.length > 26 ? ' '.repeat(29) : `  ${name.padEnd(27)}`),
    );
  }
  lines.push(
    '',
    'commands (each with --help):',
    '  accounts  the accounts that may log in, and their passwords',
    '  repair    recover a damaged data directory',
    '  migrate   create or upgrade a PostgreSQL schema',
    '  copy      move a deployment between the journal and PostgreSQL',
    '  backup    a consistent copy of a data directory while the server runs',
    '  config    the settings a start would use, and where each comes from',
    '  index     the declared fields: indexed, unique, case-insensitive',
    "  schema    the schema of the users' fields, checked on every write",
    '',
    ...wrapped(
      'USERS_ADMIN_PASSWORD sets the admin password until "accounts passwd admin" sets one; without either, one is generated into <data>/admin-password.',
      '',
    ),
    '',
    'Examples:',
    '  users-server --port 8081 --data /var/lib/users-server',
    "  users-server --store 'postgres://users@db/users' --require-session writes",
  );
  return lines.join('\n');
}

/** `text` in lines of at most 80 columns, the first after `lead`, the others indented as deep. */
function wrapped(text: string, lead: string): string[] {
  const width = 80 - lead.length;
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  lines.push(line);
  return lines.map((l, i) => (i === 0 ? lead : ' '.repeat(lead.length)) + l);
}
