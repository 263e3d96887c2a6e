import { againIfDropped, isConnectionLost, transactionPrologue, type ReservedSql, type Sql } from './driver.js';

/**
 * A transaction's statements, on a connection of its own. Each statement is
 * sent as soon as it is made, after every statement made before it, so
 * statements made together travel together and the database runs them in
 * the order they were made.
 */
export type Tx = ReservedSql;

/**
 * Ends the transaction: `COMMIT` goes with `writes` (statements already
 * made), and resolves once all of them are done. Nothing may be made on the
 * transaction after it.
 */
export type Commit = (writes: readonly Promise<unknown>[]) => Promise<void>;

/**
 * Runs `run` in one transaction, with `BEGIN` sent together with its first
 * statements and `COMMIT` together with its last writes (`commit`): a
 * transaction that reads, decides and writes takes two round trips to the
 * database, where the driver's own transactions take four, sending `BEGIN`
 * and `COMMIT` apart. When `run` does not commit, its transaction is
 * committed after it returns, and rolled back when it throws. Taking a
 * connection is tried again on a dropped one (`againIfDropped`).
 *
 * The rule this asks of `run`: every statement is made before `commit` is
 * called (a helper that awaits before it makes a statement would make it
 * after the transaction ended; one that tries is refused with an error).
 */
export async function inTransaction<T>(
  pool: Sql,
  poolSize: number,
  run: (tx: Tx, commit: Commit) => Promise<T>,
  waitSeconds?: number,
): Promise<T> {
  const connection = await againIfDropped(() => pool.reserve(), poolSize, waitSeconds);
  let ended = false;
  const tx = sendingAtOnce(connection, () => ended);
  const end = (statement: 'commit' | 'rollback') => {
    const made = tx.unsafe(statement);
    ended = true;
    return made;
  };
  const prologue = transactionPrologue(pool);
  const begun = prologue === undefined ? tx`begin` : Promise.all([tx`begin`, tx.unsafe(prologue)]);
  const commit: Commit = async (writes) => {
    await Promise.all([begun, ...writes, end('commit')]);
  };
  try {
    const result = await run(tx, commit);
    await begun;
    if (!ended) await end('commit');
    connection.release();
    return result;
  } catch (error) {
    // A lost connection was taken back by the driver when it closed: given back again, or sent
    // a ROLLBACK, it would be used with no socket (the driver then throws outside any promise).
    if (isConnectionLost(error)) throw error;
    if (!ended) {
      const rolledBack = await end('rollback').then(
        () => true,
        (failure: unknown) => !isConnectionLost(failure),
      );
      if (!rolledBack) throw error;
    }
    connection.release();
    throw error;
  }
}

/**
 * `connection`, with every statement made on it sent at once (the driver
 * sends one when it is first awaited, and a statement awaited inside a
 * helper could overtake one made before it). A statement's failure is
 * still seen by whoever awaits it; one nobody awaits after a failure
 * before it is not an unhandled rejection.
 */
function sendingAtOnce(connection: ReservedSql, ended: () => boolean): Tx {
  return new Proxy(connection, {
    apply(target, thisArg, args: unknown[]) {
      const isStatement = Array.isArray(args[0]) && 'raw' in (args[0] as object);
      if (isStatement && ended()) throw new Error('a statement was made after its transaction ended');
      const made: unknown = Reflect.apply(target, thisArg, args);
      if (isStatement) sendNow(made as ReturnType<Tx['unsafe']>);
      return made;
    },
    get(target, property) {
      if (property !== 'unsafe') return Reflect.get(target, property);
      return (...args: Parameters<Tx['unsafe']>) => {
        if (ended()) throw new Error('a statement was made after its transaction ended');
        return sendNow(target.unsafe(...args));
      };
    },
  });
}

function sendNow<Q extends ReturnType<Tx['unsafe']>>(statement: Q): Q {
  statement.execute();
  statement.catch(() => {});
  return statement;
}
