/**
 * `import` of an export (`usersctl export`): rebuilding users from their
 * records without ever overwriting a user silently. Each record either
 * gets a new id under its alias (the default; a record without one gets
 * the alias of its line, so a re-run finds what the first run made) or
 * keeps its id (`--keep-ids`); a user that
 * already exists with other content is refused unless `--overwrite`, and
 * then replaced only over the version just read (If-Match), so a change
 * made meanwhile is never lost, and that version goes into the result, so
 * nothing is overwritten without a copy. docs/cli.md "Export and import".
 */
import { RESERVATIONS_PATH, USERS_PATH, userPath } from '../shared/endpoints.js';
import { answerUser, detailOf, jsonObject, single, type Response } from './answers.js';
import { UnexpectedAnswerError } from './exit-codes.js';
import { isId } from '../shared/user.js';
import type { Context } from './context.js';
import type { ExportRecord } from './export-format.js';

interface RestoreOptions {
  keepIds: boolean;
  overwrite: boolean;
}

type Restored =
  | {
      readonly ok: true;
      readonly action: 'created' | 'unchanged' | 'replaced';
      readonly id: number;
      /** Found where the other kind of import puts it: the alias the user has on the target (null: none). */
      readonly alias?: string | null;
      /** Replaced: the representation it replaced, as the target stored it (the text of its GET). */
      readonly previous?: string;
    }
  | { readonly ok: false; readonly status: number; readonly error: string };

const JSON_HEADERS = { accept: 'application/json', 'content-type': 'application/json' };
/**
 * An If-Match no user matches (users-server's tags are 27 characters): a
 * PUT with it changes nothing, and says where an id stands: 404 never
 * issued, 410 issued and gone, 412 held by a user or a live reservation
 * (api.md "Order of checks"). A GET cannot tell a reserved id from one
 * never issued or deleted: 404 for all three.
 */
const NO_TAG = '"usersctl-no-such-version"';
/** A record whose target keeps changing under it gives up after this many tries. */
const ATTEMPTS = 3;

export class Restorer {
  constructor(
    private readonly ctx: Context,
    private readonly options: RestoreOptions,
  ) {}

  /**
   * Rebuilds one record. `lineAlias` is the alias of its line (UUIDv5),
   * under which an import with new ids creates a record without an alias
   * of its own; such a record is looked for first where an import of the
   * other kind puts it, so a run with other flags than the one before
   * adds no second copy.
   */
  async restore(record: ExportRecord, lineAlias: string): Promise<Restored> {
    if (record.alias === null) {
      const found = this.options.keepIds ? await this.foundUnder(lineAlias, record) : await this.foundAtId(record);
      if (found !== undefined) return found;
    }
    return this.options.keepIds ? this.keepId(record) : this.newId({ ...record, alias: record.alias ?? lineAlias });
  }

  /** The user an import with new ids made of `record` under `alias`: its fields, under another id. */
  private async foundUnder(alias: string, record: ExportRecord): Promise<Restored | undefined> {
    const current = await this.send('GET', `${USERS_PATH}/${alias}`);
    if (current.status !== 200 || !sameFields(answerUser(current), record.user)) return undefined;
    return { ...done('unchanged', current), alias };
  }

  /** The user an import with --keep-ids made of `record` at its id: its representation, byte for byte. */
  private async foundAtId(record: ExportRecord): Promise<Restored | undefined> {
    const current = await this.send('GET', userPath(record.id));
    if (current.status !== 200 || JSON.stringify(answerUser(current)) !== JSON.stringify(record.user)) return undefined;
    return { ...done('unchanged', current), alias: null };
  }

  /** A new id: PUT /users/<alias> only if the alias is free; a re-run finds the user there. */
  private async newId(record: ExportRecord): Promise<Restored> {
    const { id: _oldId, ...fields } = record.user;
    const body = JSON.stringify(fields);
    const path = `${USERS_PATH}/${record.alias}`;
    const created = await this.send('PUT', path, body, { 'if-none-match': '*' });
    if (created.status === 201) return done('created', created);
    if (created.status !== 412) return failed(created);
    return this.settleExisting(path, body, (current) => sameFields(current, record.user), `the alias ${record.alias}`);
  }

  /**
   * The same id: PUT /users/<id> (or /users/<alias>, which binds the alias)
   * with If-None-Match: *. An id the target never issued is reached by
   * reserving the ids before it, in order; ids skipped that way (users
   * deleted before the export) stay reservations and expire, as deleted
   * ids do: 410 on both servers.
   */
  private async keepId(record: ExportRecord): Promise<Restored> {
    const body = JSON.stringify(record.user);
    // Under its alias the user may have another id (an import with new ids made it): the same fields are the same user.
    const same = (current: Record<string, unknown>) =>
      record.alias === null ? JSON.stringify(current) === body : sameFields(current, record.user);
    const path = record.alias === null ? userPath(record.id) : `${USERS_PATH}/${record.alias}`;
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const created = await this.send('PUT', path, body, { 'if-none-match': '*' });
      if (created.status === 201) return done('created', created);
      if (created.status === 412)
        return this.settleExisting(
          path,
          body,
          same,
          record.alias === null ? `the id ${record.id}` : `the alias ${record.alias}`,
        );
      const reachable = await this.whyNotCreated(record, created);
      if (reachable !== undefined) return reachable;
    }
    return {
      ok: false,
      status: 409,
      error: `the id ${record.id} could not be issued on the target: other clients kept taking ids; run the import again`,
    };
  }

  /**
   * After a refused create: reserves the ids up to the record's (and
   * answers undefined: try again), or says why the id cannot be had.
   */
  private async whyNotCreated(record: ExportRecord, refused: Response): Promise<Restored | undefined> {
    const { id } = record;
    const meanwhile: Restored = {
      ok: false,
      status: 409,
      error: `the id ${id} was already issued on the target (to a reservation, or to a user since deleted): ids are never reused there`,
    };
    if (record.alias === null) {
      // 404: never issued here; reserving the ids up to it makes it this import's.
      if (refused.status === 410) return issuedAndGone(id);
      if (refused.status !== 404) return failed(refused);
      return (await this.reserveThrough(id)) ? undefined : meanwhile;
    }
    // 409: the id is not the next one; if it was never issued, the ids before it are reserved, so the alias's PUT gets
    // it.
    if (refused.status !== 409) return failed(refused);
    const taken = await this.takenOnTarget(record);
    if (taken !== undefined) return taken;
    return (await this.reserveThrough(id - 1)) ? undefined : meanwhile;
  }

  /**
   * Why the record's id cannot be had on the target (issued there already), asked without reserving; undefined when it
   * was never issued.
   */
  private async takenOnTarget(record: ExportRecord): Promise<Restored | undefined> {
    const { id } = record;
    const standing = await this.send('PUT', userPath(id), JSON.stringify(record.user), { 'if-match': NO_TAG });
    if (standing.status === 404) return undefined;
    if (standing.status === 410) return issuedAndGone(id);
    if (standing.status !== 412) return failed(standing);
    const user = await this.send('GET', userPath(id));
    if (user.status === 200)
      return { ok: false, status: 409, error: `the id ${id} belongs to another user on the target` };
    return {
      ok: false,
      status: 409,
      error: `the id ${id} is held by a reservation on the target, where a user gets no alias: ids are never reused there`,
    };
  }

  /** POST /reservations until the id `last` is issued; false when the target went past it. */
  private async reserveThrough(last: number): Promise<boolean> {
    for (;;) {
      const reserved = await this.send('POST', RESERVATIONS_PATH, '');
      if (reserved.status !== 201) return false;
      const id = jsonObject(reserved.text, 'a reservation').id;
      if (!isId(id)) throw new UnexpectedAnswerError('a reservation without "id"');
      if (id >= last) return id === last;
    }
  }

  /** The target exists: unchanged when `same`, else refused, or with --overwrite replaced over the version read. */
  private async settleExisting(
    path: string,
    body: string,
    same: (current: Record<string, unknown>) => boolean,
    what: string,
  ): Promise<Restored> {
    const current = await this.send('GET', path);
    if (current.status !== 200) return failed(current);
    if (same(answerUser(current))) return done('unchanged', current);
    if (!this.options.overwrite)
      return {
        ok: false,
        status: 412,
        error: `${what} exists on the target with other content; nothing was changed (--overwrite replaces it)`,
      };
    const etag = single(current.headers.etag) ?? '';
    const replaced = await this.send('PUT', path, body, { 'if-match': etag });
    if (replaced.status === 200) return { ...done('replaced', replaced), previous: current.text };
    if (replaced.status === 412)
      return {
        ok: false,
        status: 412,
        error: `${what} changed on the target while it was being imported; nothing was overwritten`,
      };
    return failed(replaced);
  }

  private send(
    method: 'GET' | 'PUT' | 'POST',
    path: string,
    body?: string,
    headers: Record<string, string> = {},
  ): Promise<Response> {
    return this.ctx.client.send({
      method,
      path,
      headers: { ...JSON_HEADERS, ...headers },
      ...(body !== undefined && { body }),
    });
  }
}

function withoutId(user: Record<string, unknown>): Record<string, unknown> {
  const { id: _id, ...fields } = user;
  return fields;
}

/** The same representation but for the id. */
function sameFields(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  return JSON.stringify(withoutId(a)) === JSON.stringify(withoutId(b));
}

function done(action: 'created' | 'unchanged' | 'replaced', response: Response): Extract<Restored, { ok: true }> {
  return { ok: true, action, id: answerUser(response).id };
}

function issuedAndGone(id: number): Restored {
  return {
    ok: false,
    status: 410,
    error: `the id ${id} was issued on the target and its user deleted: ids are never reused there`,
  };
}

function failed(response: Response): Restored {
  return { ok: false, status: response.status, error: detailOf(response) };
}
