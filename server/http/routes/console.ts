/**
 * The admin console (docs/console.md): its page at /console, its script and
 * style sheet at /console/NAME.HASH.EXT, and GET /console/session, who the
 * page is signed in as. The files are the build's (dist/console/, made by
 * `npm run build` from console/), read once when the app is made; with
 * --no-console none of these routes exists, so every path answers 404.
 */
import { readFileSync } from 'node:fs';
import { hash } from 'node:crypto';
import { problems } from '../../../shared/problems.js';
import { HttpError } from '../../errors.js';
import { entityTag, etagMatches } from '../../users/entity-tag.js';
import { empty, headers, html, json, parameter, SESSION_OPTIONAL } from '../openapi.js';
import { notFound, sendEmpty, sendJson } from '../response.js';
import type { Context, OperationDoc, Route, RouteDeps } from '../route.js';

const CONSOLE_PATH = '/console';
/** The files the page loads, as the build names them; the page refers to each as `console/NAME`. */
const ASSETS: Record<string, string> = {
  'main.js': 'text/javascript; charset=utf-8',
  'console.css': 'text/css; charset=utf-8',
};

/**
 * The page's policy: its own script and style sheet only (nothing inline,
 * no eval), requests to its own origin only, strings never turned into
 * markup (Trusted Types with no policy: `innerHTML = text` throws), no
 * framing, and no form that submits by itself (the script sends them).
 */
const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ');

const SECURITY_HEADERS: Record<string, string> = {
  'X-Content-Type-Options': 'nosniff',
  // For browsers that do not know frame-ancestors.
  'X-Frame-Options': 'DENY',
  // Not no-referrer: under it a browser sends `Origin: null` with the page's
  // POSTs, which the API's cross-site check refuses (http/origin.ts).
  'Referrer-Policy': 'same-origin',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

interface ServedFile {
  readonly body: Buffer;
  readonly type: string;
  readonly etag: string;
}

interface ConsoleFiles {
  readonly page: ServedFile;
  /** By the name the page asks for: `main.<hash>.js`. */
  readonly assets: ReadonlyMap<string, ServedFile>;
}

/** GET /console, its files and GET /console/session; none with --no-console. */
export function consoleRoutes(deps: RouteDeps): Route[] {
  if (deps.config.noConsole) return [];
  const files = readConsoleFiles();
  return [
    { method: 'GET', path: CONSOLE_PATH, handler: (ctx) => sendPage(ctx, files), doc: PAGE_DOC },
    { method: 'GET', path: `${CONSOLE_PATH}/session`, handler: (ctx) => sendSession(ctx, deps), doc: SESSION_DOC },
    { method: 'GET', path: `${CONSOLE_PATH}/:file`, handler: (ctx) => sendAsset(ctx, files), doc: ASSET_DOC },
  ];
}

const MISSING = "The console's files are not in this build (dist/console/): run npm run build.";

function sendPage(ctx: Context, files: ConsoleFiles | undefined): void {
  if (files === undefined) throw notFound(MISSING);
  // The page names the current files: it is revalidated on every load, they never are.
  sendFile(ctx, files.page, { 'Cache-Control': 'no-cache', 'Content-Security-Policy': CONSOLE_CSP });
}

function sendAsset(ctx: Context, files: ConsoleFiles | undefined): void {
  const file = files?.assets.get(ctx.params.file!);
  if (file === undefined) throw notFound(files === undefined ? MISSING : undefined);
  // The name holds the content's hash: a new build is a new name.
  sendFile(ctx, file, { 'Cache-Control': 'public, max-age=31536000, immutable' });
}

function sendFile({ req, res }: Context, file: ServedFile, headers: Record<string, string>): void {
  const fields = { ETag: file.etag, ...SECURITY_HEADERS, ...headers };
  const ifNoneMatch = req.headers['if-none-match'];
  if (ifNoneMatch !== undefined && etagMatches(ifNoneMatch, file.etag, true)) return sendEmpty(res, 304, fields);
  res.writeHead(200, { ...fields, 'Content-Type': file.type, 'Content-Length': String(file.body.length) });
  res.end(file.body);
}

/** Who the request is signed in as, for the page's header and the controls a reader may not use. */
async function sendSession(ctx: Context, deps: RouteDeps): Promise<void> {
  const principal = await deps.access.principal(ctx.req, ctx.res, ctx.now);
  if (principal === undefined)
    throw new HttpError(problems.unauthorized, 'Not signed in: POST /login with Basic credentials.', {
      'WWW-Authenticate': deps.access.challenge,
    });
  const body = { name: principal.name, account: principal.account.name, role: principal.role, via: principal.via };
  sendJson(ctx.res, 200, JSON.stringify(body), { 'Cache-Control': 'no-store', Vary: 'Cookie' });
}

/**
 * The build's files, the page's references to them given their hashed
 * names; undefined when the build has none. They are looked for where
 * each way of running the server puts this module: the bundle in
 * dist/users-server/, the compiled tree in dist/server/, the sources.
 */
function readConsoleFiles(): ConsoleFiles | undefined {
  for (const relative of ['../console/', '../../../console/', '../../../dist/console/']) {
    const dir = new URL(relative, import.meta.url);
    try {
      return filesIn(dir);
    } catch {
      // Not the build's folder (the sources' console/ has no main.js): try the next.
    }
  }
  return undefined;
}

function filesIn(dir: URL): ConsoleFiles {
  let page = readFileSync(new URL('index.html', dir), 'utf8');
  const assets = new Map<string, ServedFile>();
  for (const [name, type] of Object.entries(ASSETS)) {
    const body = readFileSync(new URL(name, dir));
    const hashed = name.replace(/\.(\w+)$/, `.${hash('sha256', body, 'base64url').slice(0, 12)}.$1`);
    assets.set(hashed, served(body, type));
    page = page.replaceAll(`"console/${name}"`, `"console/${hashed}"`);
  }
  return { page: served(Buffer.from(page), 'text/html; charset=utf-8'), assets };
}

function served(body: Buffer, type: string): ServedFile {
  return { body, type, etag: entityTag(body.toString('latin1')) };
}

// ------------------------------------------------------------ OpenAPI

const PAGE_DOC: OperationDoc = {
  operationId: 'getConsole',
  summary: 'The admin console (docs/console.md)',
  description:
    "One HTML page, the same for everyone: it signs in through `POST /login` and reads everything else from the API. `Cache-Control: no-cache` and an `ETag`; a strict `Content-Security-Policy` (no inline script, `frame-ancestors 'none'`). Absent with `--no-console`.",
  tags: ['console'],
  security: [],
  parameters: [parameter('If-None-Match')],
  responses: {
    '200': html('The page.', 'ETag'),
    '304': empty('`If-None-Match` matches the current `ETag`.', 'ETag'),
  },
  problems: [404],
};

const ASSET_DOC: OperationDoc = {
  operationId: 'getConsoleFile',
  summary: "A script or style sheet of the console, named with its content's hash",
  description: 'Cached for a year (`immutable`): a new build gives its files new names. Any other name is 404.',
  tags: ['console'],
  security: [],
  parameters: [parameter('If-None-Match')],
  responses: {
    '200': {
      description: 'The file.',
      headers: headers('ETag'),
      content: { 'text/javascript': { schema: { type: 'string' } }, 'text/css': { schema: { type: 'string' } } },
    },
    '304': empty('`If-None-Match` matches the current `ETag`.', 'ETag'),
  },
  problems: [404],
};

const SESSION_DOC: OperationDoc = {
  operationId: 'getConsoleSession',
  summary: 'Who the request acts as: its session (or API token), the account and its role',
  description:
    'For the console: `{"name":"admin","account":"admin","role":"admin","via":"session"}` (`name` is the token\'s with a token). 401 without a valid session or token, in every `--require-session` mode.',
  tags: ['console'],
  security: SESSION_OPTIONAL,
  responses: {
    '200': json('The principal.', {
      type: 'object',
      required: ['name', 'account', 'role', 'via'],
      properties: {
        name: { type: 'string' },
        account: { type: 'string' },
        role: { enum: ['admin', 'reader'] },
        via: { enum: ['session', 'token'] },
      },
    }),
  },
  problems: [401],
};
