import { SERVER_EXIT, ServerCommandError, ServerUsageError } from '../errors.js';
import { envName, isPostgresStore, redactSecrets } from '../ops/config.js';
import { commandFlags, type CommandIo } from './command-io.js';

const USAGE = `usage: users-server migrate [--store postgres://USER@HOST/DB]

Creates or upgrades the PostgreSQL schema, then exits. A server creates the
schema of an empty database at its first start and upgrades an older one
when it may; run this as a user who may change the schema when the service
may not. --store defaults to $${envName('store')}; "postgres" (or no value)
uses the standard PG* variables. Safe to run while servers run, and from
several machines at once: migrations hold an advisory lock.
Exit codes: 0 done (or nothing to do), 1 failed, 2 usage error.`;

/**
 * `users-server migrate`: exit 0 done (or nothing to do); throws ServerCommandError (exit 1) or ServerUsageError (exit
 * 2).
 */
export async function migrateCommand(argv: readonly string[], io: CommandIo): Promise<number> {
  const values = commandFlags(
    'migrate',
    argv,
    { store: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    USAGE,
    io,
  );
  if (values === undefined) return SERVER_EXIT.ok;
  const spec = values.store ?? io.env[envName('store')] ?? 'postgres';
  if (!isPostgresStore(spec))
    throw new ServerUsageError(
      `--store must be postgres or a postgres:// URL, not "${redactSecrets(spec)}": only a database has a schema to migrate`,
    );
  const url = spec === 'postgres' ? undefined : spec;
  const { connect, describeFailure, isUnavailable, COMMAND_SILENCE_SECONDS } =
    await import('../store/postgres/driver.js');
  const { migrate, schemaVersion, SCHEMA_VERSION } = await import('../store/postgres/schema.js');
  const { describeDatabase, unreachable } = await import('../store/postgres/open-postgres.js');
  const sql = await connect(url, { max: 1, silenceSeconds: COMMAND_SILENCE_SECONDS });
  try {
    const applied = await migrate(sql, (line) => io.stdout.write(line.replace(/^users-server: /, '') + '\n'));
    const version = await schemaVersion(sql);
    io.stdout.write(
      applied.length === 0
        ? `${describeDatabase(url)}: schema version ${version}, nothing to do\n`
        : `${describeDatabase(url)}: schema version ${version} of ${SCHEMA_VERSION}\n`,
    );
    return SERVER_EXIT.ok;
  } catch (error) {
    if (error instanceof ServerCommandError) throw error;
    if (isUnavailable(error)) throw unreachable(url, (error as { code: string }).code, 0);
    throw new ServerCommandError(`cannot migrate ${describeDatabase(url)}: ${describeFailure(error)}`);
  } finally {
    await sql.end({ timeout: 1 });
  }
}
