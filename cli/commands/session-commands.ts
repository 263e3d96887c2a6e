/** login, logout and status: the session cookie in the jar. */
import { LOGIN_PATH, LOGOUT_PATH } from '../../shared/endpoints.js';
import type { Context } from '../context.js';
import { UnexpectedAnswerError, CliUsageError } from '../exit-codes.js';
import { statusError } from '../answers.js';
import { promptHidden, readFirstLine, type TtyInput } from '../streams.js';

export interface LoginOptions {
  user: string;
  passwordStdin?: boolean;
}

/** POST /login with Basic credentials; the session cookie goes into the jar. */
export async function login(ctx: Context, options: LoginOptions): Promise<void> {
  if (options.user.includes(':')) throw new CliUsageError('--user: a user name cannot contain ":" (RFC 7617)');
  const password = await readPassword(ctx, options);
  const credentials = Buffer.from(`${options.user}:${password}`, 'utf8').toString('base64');
  await ctx.client.expect(
    { method: 'POST', path: LOGIN_PATH, headers: { authorization: `Basic ${credentials}` } },
    [200],
  );
  await ctx.client.session.save();
  ctx.info(`logged in as ${options.user}; the session is in ${ctx.options.jarPath}`);
}

async function readPassword(ctx: Context, options: LoginOptions): Promise<string> {
  const stdin = ctx.io.stdin;
  if (options.passwordStdin === true) {
    const line = await readFirstLine(stdin as AsyncIterable<Buffer | string>, 'the password on stdin');
    if (line === undefined) throw new CliUsageError('--password-stdin: stdin is empty');
    return line;
  }
  if (stdin.isTTY === true)
    return promptHidden(stdin as unknown as TtyInput, ctx.io.stderr, `Password for ${options.user}: `);
  throw new CliUsageError(
    'stdin is not a terminal, so there is no one to ask for the password: pass it with --password-stdin',
  );
}

/** POST /logout: the server revokes the session and its clearing cookie empties the jar. */
export async function logout(ctx: Context): Promise<void> {
  await ctx.client.expect({ method: 'POST', path: LOGOUT_PATH }, [200, 204]);
  ctx.info('logged out');
}

/** GET /: `OK` (exit 0) with a valid session, else `not authorized` (exit 4). */
export async function status(ctx: Context): Promise<void> {
  const response = await ctx.client.send({ method: 'GET', path: '/', headers: { accept: 'application/json' } });
  if (response.status !== 200) throw statusError(response, ctx.client.urlOf('/'), '/');
  if (!isOk(response.text)) throw new UnexpectedAnswerError('GET / answered 200 without the JSON string "OK"');
  await ctx.out.write(ctx.options.json ? `${response.text}\n` : 'OK\n');
}

function isOk(text: string): boolean {
  try {
    return JSON.parse(text) === 'OK';
  } catch {
    return false;
  }
}
