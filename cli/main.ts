/**
 * usersctl: the command-line client of users-server. `run` parses the
 * command line with commander, runs one command, and is the one place that
 * turns an error into an exit code and one line on stderr.
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import * as patching from './commands/patch-commands.js';
import * as session from './commands/session-commands.js';
import * as tokens from './commands/token-commands.js';
import * as users from './commands/user-commands.js';
import { watch, type WatchOptions } from './commands/watch-command.js';
import {
  Context,
  DEFAULT_RETRIES,
  DEFAULT_TIMEOUT_SECONDS,
  DEFAULT_URL,
  errorPrefix,
  noColorUnset,
  resolveGlobals,
  type GlobalFlags,
  type Io,
} from './context.js';
import { OUTPUT_FORMATS } from './output-format.js';
import { CliError, errorRecord, EXIT, StatusError } from './exit-codes.js';
import { violationLine } from './answers.js';
import {
  DEFAULT_CONCURRENCY,
  DEFAULT_IMPORT_NAMESPACE,
  MAX_CONCURRENCY,
  importUsers,
  type ImportOptions,
} from './import.js';
import { completionScript, manPage, SHELLS, type Shell } from './completion.js';
import { STOP_EXIT } from './streams.js';
import { writeFailure } from '../shared/file-errors.js';
import { packageVersion } from '../shared/package-version.js';

export type { Io } from './context.js';
export { EXIT } from './exit-codes.js';

const HELP_AFTER = `
Environment:
  USERSCTL_URL         server base URL (--url wins)
  USERSCTL_COOKIE_JAR  cookie jar file (--cookie-jar wins); default
                       $XDG_STATE_HOME/usersctl/cookies.txt, XDG_STATE_HOME
                       defaulting to ~/.local/state
  USERSCTL_TOKEN       API token (--token wins); with one, the jar is not used
  NO_COLOR             no colour on stderr (colour only on a terminal anyway)

Exit codes:
  0  ok
  1  unexpected error
  2  usage: bad flags, arguments or input
  3  not found (404)
  4  not authorized or forbidden (401, 403)
  5  conflict or other client error (409, 410, 412, 422, ...)
  6  server error (5xx) after retries
  7  network: cannot connect, DNS, timeout
  8  import: some lines failed, or the export read was cut short
  130, 141, 143  interrupted: SIGINT, output closed, SIGTERM
                 (one line on stderr says what was done)

Examples:
  printf '%s\\n' "$PASSWORD" | usersctl login --password-stdin
  usersctl put alice --name 'Alice Liddell'
  usersctl get alice | jq -r .id
  usersctl list | jq -r 'select(.name | test("^A")) | .id' | usersctl get -
  usersctl put alice --name Alice --if-match "$(usersctl get --etag alice)"
  usersctl list -o wide
  usersctl export > users.ndjson
  usersctl import --keep-ids users.ndjson > results.ndjson
  usersctl import --alias-field login < people.ndjson | jq -c 'select(.ok|not)'
`;

/** argv without node and the script (process.argv.slice(2)); resolves to the exit code; never throws. */
export async function run(argv: readonly string[], io: Partial<Io> = {}): Promise<number> {
  const fullIo: Io = {
    stdout: io.stdout ?? process.stdout,
    stderr: io.stderr ?? process.stderr,
    stdin: io.stdin ?? process.stdin,
    env: io.env ?? process.env,
  };
  ignoreClosedPipe(fullIo.stdout);
  ignoreClosedPipe(fullIo.stderr);
  const color = fullIo.stderr.isTTY === true && noColorUnset(fullIo.env);
  let exitCode: number = EXIT.ok;
  let program: Command | undefined;
  try {
    if (commandWord(argv) === undefined) throw new CliError('missing command; see usersctl --help', EXIT.usage);
    program = buildProgram(fullIo, (code) => (exitCode = code));
    await parseWithoutHostExitCode(program, argv);
    return await unwrittenOutput(fullIo, exitCode);
  } catch (error) {
    try {
      const { message, code } = describe(error, helpFor(program, argv));
      if (message === undefined) return await unwrittenOutput(fullIo, code);
      // --json: a script reads the failure as JSON too, one object a line.
      if (message !== undefined && argv.includes('--json'))
        fullIo.stderr.write(JSON.stringify(errorRecord(message, code, error)) + '\n');
      else if (error instanceof StatusError && error.violations.length > 0)
        for (const violation of error.violations)
          fullIo.stderr.write(`${errorPrefix(color)} ${violationLine(violation)}\n`);
      else if (message !== undefined) fullIo.stderr.write(`${errorPrefix(color)} ${message}\n`);
      return code;
    } catch {
      return EXIT.unexpected;
    }
  }
}

/**
 * commander's help() takes its exit code from process.exitCode: a code the
 * host process already set (a test runner's after a failed test, a program
 * that embeds run()) would turn `help put` into a usage error.
 */
async function parseWithoutHostExitCode(program: Command, argv: readonly string[]): Promise<void> {
  const hostCode = process.exitCode;
  process.exitCode = undefined;
  try {
    await program.parseAsync([...argv], { from: 'user' });
  } finally {
    process.exitCode ??= hostCode;
  }
}

/** Streams already watched, and the code of a write that failed on one (not EPIPE). */
const guarded = new WeakMap<object, { failed?: string }>();

/**
 * `usersctl --help | head` closes the pipe early: that is the reader's
 * choice, not an error to report, and without a listener node would throw
 * it as an uncaught 'error' event. Any other write error (a full disk) is
 * kept: a data command's Output reports it, and `unwrittenOutput` reports
 * it for what commander wrote (help, version, completion).
 */
function ignoreClosedPipe(stream: object): void {
  const emitter = stream as Partial<NodeJS.EventEmitter>;
  if (typeof emitter.on !== 'function' || guarded.has(stream)) return;
  const state: { failed?: string } = {};
  guarded.set(stream, state);
  emitter.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') state.failed ??= error.code ?? 'EIO';
  });
}

/** `code`, or 1 with one line on stderr when a write to stdout failed and nothing said so yet. */
async function unwrittenOutput(io: Io, code: number): Promise<number> {
  // A stream reports a failed write on a later tick.
  await new Promise((resolve) => setImmediate(resolve));
  const failed = guarded.get(io.stdout)?.failed;
  if (failed === undefined || code !== EXIT.ok) return code;
  io.stderr.write(
    `usersctl: cannot write the output: ${writeFailure(failed)}; run the command again once it can be written\n`,
  );
  return EXIT.unexpected;
}

/**
 * The message line and exit code for anything a command threw. A usage
 * error of commander's is one line that names the help to read: `help` is
 * that command, e.g. `usersctl put --help`.
 */
function describe(error: unknown, help: string): { message: string | undefined; code: number } {
  if (error instanceof CommanderError) {
    // --help, `help <command>` and --version printed what they print: success.
    if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version')
      return { message: undefined, code: EXIT.ok };
    // Help shown by commander itself; on stderr (exit code 1 in commander's terms) it answered a usage error.
    if (error.code === 'commander.help')
      return { message: undefined, code: error.exitCode === 0 ? EXIT.ok : EXIT.usage };
    return {
      message: `${usageMessage(error.message)}; see ${GLOBAL_OPTION_VALUE.test(error.message) ? 'usersctl --help' : help}`,
      code: EXIT.usage,
    };
  }
  // A user not found is named: "999: No such user."
  if (
    error instanceof StatusError &&
    error.exitCode === EXIT.notFound &&
    error.ref !== undefined &&
    !error.message.includes(error.ref)
  )
    return { message: `${error.ref}: ${error.message}`, code: error.exitCode };
  if (error instanceof CliError) return { message: error.message, code: error.exitCode };
  // A bug or an environment failure (disk full writing the jar, ...): the message, never the stack.
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return {
    message: `unexpected error: ${message}${code !== undefined && !message.includes(code) ? ` (${code})` : ''}`,
    code: EXIT.unexpected,
  };
}

/**
 * commander's usage error as one line: "unknown command 'getx'\n(Did you
 * mean get?)" with the suggestion joined, and "option '--limit <n>'
 * argument '0' is invalid. --limit must be ..." as our own sentence with
 * the value given.
 */
function usageMessage(text: string): string {
  const message = text.replace(/^error: /, '').replace(/\.?\n\(Did you mean (.*)\?\)$/, ' (did you mean $1?)');
  const invalid = /^option '(\S+)[^']*' argument '(.*)' is invalid\. (.*?)\.?$/s.exec(message);
  if (invalid === null) return message.replace(/\.$/, '');
  const [, flag, value, reason] = invalid as unknown as [string, string, string, string];
  return `${reason.replace(/^Allowed choices are /, `${flag} must be one of `)} (not '${value}')`;
}

/** A bad value of a global option (--retries, --timeout): the help to read is the program's. */
const GLOBAL_OPTION_VALUE = /^error: option '--(retries|timeout|url|cookie-jar|token)\b/;

/** Global options that take a value, and those that do not: commandWord steps over them. */
const VALUE_OPTIONS = new Set(['--url', '--cookie-jar', '--token', '--timeout', '--retries']);
const FLAG_OPTIONS = new Set(['--json', '-q', '--quiet', '-v', '--verbose']);

/**
 * The first word of argv past the global options; undefined when there is
 * none, a usage error in one line instead of commander's whole help on
 * stderr. Anything else (an unknown option too) is left to commander.
 */
function commandWord(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (VALUE_OPTIONS.has(arg)) i++;
    else if (!FLAG_OPTIONS.has(arg) && !VALUE_OPTIONS.has(arg.split('=')[0]!)) return arg;
  }
  return undefined;
}

/** The help that answers a usage error: the command's own when argv names one. */
function helpFor(program: Command | undefined, argv: readonly string[]): string {
  const word = commandWord(argv);
  const command = program?.commands.find((c) => c.name() === word && word !== 'help');
  if (command === undefined) return 'usersctl --help';
  const names = [command.name()];
  // `usersctl token create ...`: the subcommand's help, when argv names one.
  const sub = command.commands.find((c) => argv.includes(c.name()));
  if (sub !== undefined) names.push(sub.name());
  return `usersctl ${names.join(' ')} --help`;
}

function integer(name: string, min: number, max: number) {
  return (value: string): number => {
    const n = /^\d+$/.test(value) ? Number(value) : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max)
      throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}.`);
    return n;
  };
}

/** A repeatable option's values, in order. */
function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function seconds(value: string): number {
  const n = /^\d+(\.\d+)?$/.test(value) ? Number(value) : NaN;
  if (!(n > 0) || n > 86_400)
    throw new InvalidArgumentError('--timeout must be a number of seconds above 0, at most 86400.');
  return n;
}

/** `-o FORMAT` of the listing commands (output-format.ts). */
export function outputOption(): Option {
  return new Option('-o, --output <format>', `${OUTPUT_FORMATS.join('|')}: table on a terminal, else ndjson`);
}

/** A command's body, as `action` wraps it: the context, then commander's arguments. */
type Action = <A extends unknown[]>(
  body: (ctx: Context, ...args: A) => Promise<number | void>,
) => (...args: A) => Promise<void>;

function buildProgram(io: Io, setExitCode: (code: number) => void): Command {
  const program = newProgram(io);
  /** Wraps a command: globals resolved, a Context made and closed (the jar saved) whatever happens. */
  const action: Action =
    (body) =>
    async (...args) => {
      const command = args[args.length - 1] as Command;
      const ctx = new Context(io, resolveGlobals(command.optsWithGlobals<GlobalFlags>(), io.env));
      let failed = true;
      try {
        const code = (await body(ctx, ...args)) ?? EXIT.ok;
        // Stopped early (a signal, a closed output): the command said what it did; the exit code says it stopped.
        const stop = ctx.interruption.reason;
        if (stop !== undefined && !ctx.stopReported)
          ctx.fail(
            `stopped early (${ctx.interruption.label}): ${stop === 'output failed' ? 'the output may end in a cut line; run the command again once it can be written' : 'what was written before is complete'}`,
          );
        setExitCode(stop === undefined ? code : STOP_EXIT[stop]);
        failed = false;
      } finally {
        // A failed close must not hide the command's own error.
        if (failed) await ctx.close().catch(() => {});
        else await ctx.close();
      }
    };
  addSessionCommands(program, action);
  addUserCommands(program, action);
  addCreateCommands(program, action);
  addImportCommand(program, action);
  addTokenCommands(program, action);
  addShellCommands(program, io);
  return program;
}

/** `completion SHELL` and the hidden `man`: generated from this program, so they say what --help says. */
function addShellCommands(program: Command, io: Io): void {
  program
    .command('completion')
    .description('print the shell completion script for bash, zsh or fish')
    .argument('<shell>', 'bash, zsh or fish')
    .addHelpText('after', '\nExample:\n  eval "$(usersctl completion bash)"\n')
    .action((shell: string) => {
      if (!(SHELLS as readonly string[]).includes(shell))
        throw new CliError(`no completion for ${JSON.stringify(shell)}: give bash, zsh or fish`, EXIT.usage);
      io.stdout.write(completionScript(program, shell as Shell));
    });
  program
    .command('man', { hidden: true })
    .description('print the usersctl(1) man page (npm run build writes it to dist/man/)')
    .action(
      () =>
        void io.stdout.write(
          manPage(program, new Date().toISOString().slice(0, 10), packageVersion(import.meta.url), HELP_AFTER),
        ),
    );
}

/** The program with its global options, help and output wired to `io`. */
function newProgram(io: Io): Command {
  const program = new Command('usersctl');
  program
    .description('Script users-server from a shell: sessions, users, bulk import and export.')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
      // run() prints the one error line itself.
      outputError: () => {},
      getOutHelpWidth: () => 80,
      getErrHelpWidth: () => 80,
      getOutHasColors: () => false,
      getErrHasColors: () => false,
    })
    .option('--url <url>', `server base URL (env USERSCTL_URL, default ${DEFAULT_URL})`)
    .option(
      '--cookie-jar <file>',
      'Netscape cookie file holding the session; one a server, as cookies do not tell ports apart (env USERSCTL_COOKIE_JAR)',
    )
    .option(
      '--token <token>',
      'API token sent as Authorization: Bearer instead of the session (env USERSCTL_TOKEN, which ps cannot show)',
    )
    .option(
      '--json',
      'machine output: the server JSON unchanged, several results as NDJSON; failures as JSON on stderr',
    )
    .option('--timeout <seconds>', `connect and response timeout (default ${DEFAULT_TIMEOUT_SECONDS})`, seconds)
    .option(
      '--retries <n>',
      `retries where safe, with backoff (default ${DEFAULT_RETRIES})`,
      integer('--retries', 0, 100),
    )
    .option('-q, --quiet', 'no messages on stderr except errors')
    .option('-v, --verbose', 'print the HTTP exchange on stderr, secrets masked')
    .version(packageVersion(import.meta.url), '--version', 'print the version')
    .helpOption('-h, --help', 'show help')
    .helpCommand('help [command]', 'show help for a command')
    .addHelpText('after', HELP_AFTER)
    .showSuggestionAfterError(true);
  return program;
}

function addSessionCommands(program: Command, action: Action): void {
  program
    .command('login')
    .description('log in (POST /login) and keep the session cookie in the jar')
    .option('--user <name>', 'account name', 'admin')
    .option('--password-stdin', 'read the password from the first line of stdin')
    .addHelpText(
      'after',
      '\nWithout --password-stdin the password is asked on the terminal, without echo.\nExample:\n  usersctl login --user admin --password-stdin < ~/.users-password\n',
    )
    .action(action((ctx, options: session.LoginOptions) => session.login(ctx, options)));

  program
    .command('logout')
    .description('end the session on the server and drop it from the jar')
    .addHelpText(
      'after',
      "\nIn a script, after login, to log out whenever it ends:\n\nExample:\n  trap 'usersctl logout' EXIT\n",
    )
    .action(action((ctx) => session.logout(ctx)));

  program
    .command('status')
    .description('print OK when the session is valid (exit 0), else "not authorized" (exit 4)')
    .addHelpText('after', '\nExample:\n  usersctl status -q || usersctl login --password-stdin < ~/.users-password\n')
    .action(action((ctx) => session.status(ctx)));
}

function addUserCommands(program: Command, action: Action): void {
  program
    .command('get')
    .description('print users (ids or aliases; - reads refs from stdin, one a line)')
    .argument('<ref...>', 'user ids or aliases, or - for stdin')
    .option('--etag', 'print the ETag instead of the user (for put/delete --if-match)')
    .addOption(outputOption())
    .addHelpText('after', '\nExample:\n  usersctl list | jq -r .id | usersctl get -\n')
    .action(action((ctx, refs: string[], options: users.GetOptions) => users.get(ctx, refs, options)));

  program
    .command('put')
    .description('create or replace a user (PUT /users/<ref>)')
    .argument('<ref>', 'user id or alias')
    .option('--name <name>', 'the name (with -f: replaces the name in the file)')
    .option('-f, --file <file>', 'the user as a JSON object, - for stdin')
    .option('--if-match <etag>', 'only if the user still has this ETag (else exit 5)')
    .option('--create-only', 'only if the user does not exist yet (If-None-Match: *)')
    .option('--no-create', 'only if the user exists already (If-Match: *); never creates')
    .addHelpText(
      'after',
      '\nExample:\n  jq -n \'{name: "Alice", email: "alice@example.com"}\' | usersctl put alice -f -\n',
    )
    .action(action((ctx, ref: string, options: users.PutOptions) => users.put(ctx, ref, options)));

  program
    .command('set')
    .description('change some fields of a user, keeping the others (PATCH with a JSON merge patch)')
    .argument('<ref>', 'user id or alias')
    .argument('[field...]', 'FIELD=TEXT sets a string, FIELD:=JSON any JSON value; a.b reaches into objects')
    .option('--unset <field>', 'remove a field (repeatable)', collect, [])
    .option('--if-match <etag>', 'only if the user still has this ETag (else exit 5)')
    .addHelpText(
      'after',
      '\nExample:\n  usersctl set alice email=alice@example.com address.city=Oslo --unset nickname\n',
    )
    .action(
      action((ctx, ref: string, fields: string[], options: patching.SetOptions) =>
        patching.set(ctx, ref, fields, options),
      ),
    );

  program
    .command('patch')
    .description('apply a JSON merge patch (RFC 7396) to a user: null removes a member, objects merge')
    .argument('<ref>', 'user id or alias')
    .requiredOption('-f, --file <file>', 'the merge patch, - for stdin')
    .option('--if-match <etag>', 'only if the user still has this ETag (else exit 5)')
    .addHelpText('after', '\nExample:\n  echo \'{"age":42,"nickname":null}\' | usersctl patch alice -f -\n')
    .action(action((ctx, ref: string, options: patching.PatchOptions) => patching.patch(ctx, ref, options)));

  program
    .command('edit')
    .description('edit a user in $VISUAL or $EDITOR, saved only if nobody changed it meanwhile')
    .argument('<ref>', 'user id or alias')
    .addHelpText('after', '\nExample:\n  EDITOR="sed -i s/Oslo/Bergen/" usersctl edit alice\n')
    .action(action((ctx, ref: string) => patching.edit(ctx, ref)));

  program
    .command('delete')
    .description('delete users (ids or aliases; - reads refs from stdin, one a line), printing each as it was')
    .argument('<ref...>', 'user ids or aliases, or - for stdin')
    .option('--if-match <etag>', 'only if the user still has this ETag (one ref)')
    .addHelpText('after', '\nExample:\n  usersctl list | jq -r \'select(.name == "Test") | .id\' | usersctl delete -\n')
    .action(action((ctx, refs: string[], options: users.DeleteOptions) => users.remove(ctx, refs, options)));

  program
    .command('list')
    .description('every user, or those a filter matches, following the pages to the end')
    .option('--filter <expr>', 'only the users this SCIM filter matches: \'team eq "red" and age ge 30\'')
    .option('--sort <keys>', 'in the order of these paths, - before one for descending: -age,name')
    .option('--count', 'print how many users match, not the users')
    .option('--limit <n>', 'users per page', integer('--limit', 1, users.MAX_PAGE_SIZE), users.DEFAULT_PAGE_SIZE)
    .addOption(outputOption())
    .addHelpText(
      'after',
      `\nExamples:\n  usersctl list -o wide\n  usersctl list | jq -r .name | sort | uniq -c\n  usersctl list --filter 'team eq "red"' --sort -age\n  usersctl list --filter 'email ew "@example.com"' --count\n`,
    )
    .action(action((ctx, options: users.ListOptions) => users.list(ctx, options)));

  program
    .command('find')
    .description('the users whose PATH equals VALUE (a filter PATH eq VALUE), following the pages to the end')
    .argument('<path>', 'a member of the user, dotted into nested objects: email, address.city')
    .argument('<value>', 'the value, as a string (with --json-value: a JSON literal)')
    .option('--json-value', 'VALUE is JSON: a number, true, false, null or a quoted string')
    .option('--limit <n>', 'users per page', integer('--limit', 1, users.MAX_PAGE_SIZE), users.DEFAULT_PAGE_SIZE)
    .addOption(outputOption())
    .addHelpText('after', '\nExamples:\n  usersctl find email ann@example.com\n  usersctl find age 41 --json-value\n')
    .action(
      action((ctx, path: string, value: string, options: users.FindCommandOptions) =>
        users.find(ctx, path, value, options),
      ),
    );

  program
    .command('watch')
    .description('follow the changes of users (GET /changes), a JSON line each, as they happen')
    .option('--since <cursor>', 'start after this cursor (one watch printed); default: from now on')
    .option('--from-start', 'start at the oldest change the server keeps')
    .option('--no-follow', 'print the changes committed so far, then exit')
    .addHelpText(
      'after',
      '\nReconnects with the last cursor when the connection drops; on Ctrl-C it\nprints the last cursor on stderr, for --since next time.\n\nExample:\n  usersctl watch --from-start --no-follow | jq -r .op | sort | uniq -c\n',
    )
    .action(action((ctx, options: WatchOptions) => watch(ctx, options)));

  program
    .command('export')
    .description(
      'every user (or those --filter matches) with its id and alias, as NDJSON that import rebuilds them from',
    )
    .option('--filter <expr>', 'only the users this SCIM filter matches')
    .addHelpText(
      'after',
      '\nA header line, then {"id":N,"alias":"..."|null,"user":{...}} a user, by id,\nthen {"usersctl":"end","users":N} once the last user is out.\nOn a terminal, the progress goes to stderr.\n\nExample:\n  usersctl export | gzip > users-$(date +%F).ndjson.gz\n',
    )
    .action(action((ctx, options: { filter?: string }) => users.exportUsers(ctx, options)));

  program
    .command('mv')
    .description('move a user to a new id (the server needs --allow-id-change)')
    .argument('<ref>', 'user id or alias')
    .argument('<new-id>', 'an id never issued before')
    .addHelpText('after', '\nExample:\n  usersctl mv alice 5000\n')
    .action(action((ctx, ref: string, newId: string) => users.move(ctx, ref, newId)));
}

function addCreateCommands(program: Command, action: Action): void {
  program
    .command('reserve')
    .description('reserve an id; prints "<id><TAB><expiresAt>" (--json: the server JSON)')
    .addHelpText('after', '\nExample:\n  id=$(usersctl reserve | cut -f1) && usersctl put "$id" --name Bob\n')
    .action(action((ctx) => users.reserve(ctx)));

  program
    .command('create')
    .description('create a user, safe to retry: under a fresh UUID alias, or under a reserved id')
    .option('--name <name>', 'the name')
    .option('-f, --file <file>', 'the user as a JSON object, - for stdin')
    .addOption(
      new Option('--mode <mode>', 'uuid: PUT /users/<new UUID>; reserve: POST /reservations, then PUT /users/<id>')
        .choices(['uuid', 'reserve'])
        .default('uuid'),
    )
    .addHelpText('after', '\nExample:\n  usersctl create --name Carol --mode reserve | jq .id\n')
    .action(action((ctx, options: users.CreateOptions) => users.create(ctx, options)));

  program
    .command('new')
    .description('create a user with POST /users/new and an automatic Idempotency-Key')
    .option('--name <name>', 'the name')
    .option('-f, --file <file>', 'the user as a JSON object, - for stdin')
    .addHelpText('after', '\nExample:\n  usersctl new --name Dave | jq .id\n')
    .action(action((ctx, options: users.BodyOptions) => users.createNew(ctx, options)));
}

function addImportCommand(program: Command, action: Action): void {
  program
    .command('import')
    .description('create or replace users from NDJSON; one NDJSON result per input line, in input order')
    .argument('[file]', 'NDJSON input, - for stdin (default: stdin)')
    .option('-f, --file <file>', 'the same as the [file] argument')
    .option(
      '--concurrency <n>',
      'requests in flight',
      integer('--concurrency', 1, MAX_CONCURRENCY),
      DEFAULT_CONCURRENCY,
    )
    .option('--alias-field <field>', 'PUT each line to /users/<value of this field>')
    .option('--uuid-namespace <uuid>', 'PUT each line to /users/<UUIDv5(namespace, line)>')
    .option('--keep-ids', "an export: keep each user's id (one at a time, in id order) instead of getting new ones")
    .option('--overwrite', 'an export: replace a user that exists with other content (over the version read: If-Match)')
    .addHelpText(
      'after',
      `
A line with a numeric "id" is PUT to /users/<id>. Otherwise the alias comes
from --alias-field, else from UUIDv5 of the line's bytes (namespace
--uuid-namespace, default ${DEFAULT_IMPORT_NAMESPACE}),
so a re-run creates no duplicates.
An export (usersctl export) is rebuilt instead: each user gets a new id (its
result maps oldId to id), or keeps it with --keep-ids; a user that exists with
other content is left alone and reported, unless --overwrite.
Exit 8 when some lines failed.

Examples:
  usersctl import users.ndjson | jq -c 'select(.ok | not)'
  usersctl export > backup.ndjson
  usersctl import --keep-ids backup.ndjson | jq -c 'select(.ok | not)'
`,
    )
    .action(
      action((ctx, file: string | undefined, options: ImportOptions) => importUsers(ctx, { ...options, input: file })),
    );
}

function addTokenCommands(program: Command, action: Action): void {
  const group = program
    .command('tokens')
    .description("API tokens for scripts and scrapers: create, list, revoke (an admin's session or token)")
    .addHelpText('after', '\nExample:\n  export USERSCTL_TOKEN=$(usersctl tokens create backup --expires 90d)\n');
  group
    .command('create')
    .description('make a token; prints it on stdout, once (--json: the server JSON)')
    .argument('<name>', 'a name for it, unique: 1 to 64 of A-Z a-z 0-9 . _ -')
    .addOption(new Option('--role <role>', 'what it may do').choices(['reader', 'admin']).default('reader'))
    .option('--expires <lifetime>', 'lifetime such as 90d, 12h, 30m, 2w, 3600s, or never (default never)')
    .addHelpText('after', '\nExample:\n  (umask 077; usersctl tokens create prometheus --expires 52w > prom.token)\n')
    .action(action((ctx, name: string, options: tokens.CreateTokenOptions) => tokens.create(ctx, name, options)));
  group
    .command('list')
    .description('every token (ID NAME ROLE CREATED EXPIRES), never the secrets themselves')
    .addOption(outputOption())
    .addHelpText(
      'after',
      "\nExample:\n  usersctl tokens list | jq -r 'select(.expired).id' | usersctl tokens revoke -\n",
    )
    .action(action((ctx, options: { output?: string }) => tokens.list(ctx, options.output)));
  group
    .command('revoke')
    .description('revoke tokens by id or name (- reads them from stdin, one a line); at once, on every instance')
    .argument('<token...>', 'token ids or names, or - for stdin')
    .addHelpText('after', '\nExample:\n  usersctl tokens revoke prometheus\n')
    .action(action((ctx, refs: string[]) => tokens.revoke(ctx, refs)));
}
