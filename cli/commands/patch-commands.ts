/** set, patch and edit: changing some fields of a user (PATCH with a JSON merge patch, or an editor and If-Match). */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jsonErrorPlace, jsonErrorReason } from '../../shared/json-position.js';
import { applyMergePatch, MERGE_PATCH_TYPE, mergePatchBetween, sameJson } from '../../shared/merge-patch.js';
import { suggestingAliases } from '../alias-suggestions.js';
import { answerUser, single, type Response } from '../answers.js';
import type { Context } from '../context.js';
import { CliError, CliUsageError, StatusError } from '../exit-codes.js';
import { assignmentsPatch } from '../field-assignments.js';
import { refPath } from './user-commands.js';

export interface SetOptions {
  unset?: string[];
  ifMatch?: string;
}

/** `set REF FIELD=VALUE ... [FIELD:=JSON ...] [--unset FIELD]`: one PATCH, printing the user as it now is. */
export function set(ctx: Context, ref: string, assignments: readonly string[], options: SetOptions): Promise<void> {
  const patch = assignmentsPatch(assignments, options.unset ?? []);
  return sendPatch(ctx, ref, JSON.stringify(patch), options.ifMatch);
}

export interface PatchOptions {
  file: string;
  ifMatch?: string;
}

/** `patch REF -f FILE`: the file (or stdin) as the merge patch. */
export async function patch(ctx: Context, ref: string, options: PatchOptions): Promise<void> {
  const text = await ctx.readInput(options.file);
  parseJson(text, options.file === '-' ? 'stdin' : options.file);
  return sendPatch(ctx, ref, text, options.ifMatch);
}

async function sendPatch(ctx: Context, ref: string, body: string, ifMatch: string | undefined): Promise<void> {
  const headers: Record<string, string> = { accept: 'application/json', 'content-type': MERGE_PATCH_TYPE };
  if (ifMatch !== undefined) headers['if-match'] = ifMatch;
  const response = await aboutRef(ref, () =>
    suggestingAliases(ctx, ref, () => ctx.client.expect({ method: 'PATCH', path: refPath(ref), headers, body }, [200])),
  );
  await ctx.out.write(response.text + '\n');
}

/** JSON.parse, or a usage error that names `where` and the place. */
function parseJson(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new CliUsageError(
      `${where} is not JSON at ${jsonErrorPlace(text, error)} (${jsonErrorReason(error)}); fix it and run the command again`,
    );
  }
}

async function aboutRef<T>(ref: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof CliError) error.ref ??= ref;
    throw error;
  }
}

/** A version of a user: its representation and ETag. */
interface Version {
  user: Record<string, unknown>;
  etag: string;
}

/**
 * `edit REF`: the user in $VISUAL or $EDITOR, saved with If-Match. When
 * someone changed the user meanwhile (412), the person's change is put on
 * the new version and the editor opens again on it, saying what changed;
 * an unchanged file changes nothing.
 */
export async function edit(ctx: Context, ref: string): Promise<void> {
  const editor = editorOf(ctx.io.env);
  const dir = mkdtempSync(join(tmpdir(), 'usersctl-edit-'));
  const file = join(dir, `${ref}.json`);
  let keep = false;
  try {
    await aboutRef(ref, () => editLoop(ctx, ref, editor, file));
  } catch (error) {
    keep = error instanceof UnsavedEditError;
    throw error;
  } finally {
    if (!keep) rmSync(dir, { recursive: true, force: true });
  }
}

/** An edited file that cannot be saved (not JSON, not an object): the file is kept, and the message says where. */
class UnsavedEditError extends CliUsageError {
  override readonly name = 'UnsavedEditError';
}

async function editLoop(ctx: Context, ref: string, editor: string, file: string): Promise<void> {
  let base = await currentVersion(ctx, ref);
  let text = `${JSON.stringify(base.user, null, 2)}\n`;
  for (;;) {
    writeFileSync(file, text, { mode: 0o600 });
    await runEditor(editor, file, ctx.io.env);
    text = readFileSync(file, 'utf8');
    const edited = parseEdited(text, file);
    if (sameJson(edited, base.user)) return ctx.info(`${ref}: no change, nothing saved`);
    const saved = await saveEdit(ctx, ref, edited, base.etag);
    if (saved !== undefined) return void (await ctx.out.write(saved.text + '\n'));
    const newer = await currentVersion(ctx, ref);
    ctx.warn(
      `${ref} was changed meanwhile (${changedFields(base.user, newer.user)}): your change is put on the new version, and saved when you close the editor (set the file back to save nothing)`,
    );
    text = `${JSON.stringify(applyMergePatch(newer.user, mergePatchBetween(base.user, edited)), null, 2)}\n`;
    base = newer;
  }
}

/** The edited file as a user object; anything else stops the edit with nothing saved, and the file is kept. */
function parseEdited(text: string, file: string): Record<string, unknown> {
  let user: unknown;
  try {
    user = JSON.parse(text);
  } catch (error) {
    throw new UnsavedEditError(
      `the edited user is not JSON at ${jsonErrorPlace(text, error)} (${jsonErrorReason(error)}); nothing was saved, and your text is kept in ${file}`,
    );
  }
  if (typeof user !== 'object' || user === null || Array.isArray(user))
    throw new UnsavedEditError(
      `the edited user must be a JSON object; nothing was saved, and your text is kept in ${file}`,
    );
  return user as Record<string, unknown>;
}

async function currentVersion(ctx: Context, ref: string): Promise<Version> {
  const response = await suggestingAliases(ctx, ref, () =>
    ctx.client.expect({ method: 'GET', path: refPath(ref), headers: { accept: 'application/json' } }, [200]),
  );
  return { user: answerUser(response), etag: etagOf(response) };
}

function etagOf(response: Response): string {
  const etag = single(response.headers.etag);
  if (etag === undefined)
    throw new CliUsageError('the server sent the user without an ETag: edit needs one to save safely');
  return etag;
}

/** PUT with If-Match: the answer, or undefined when the user changed meanwhile (412). */
async function saveEdit(
  ctx: Context,
  ref: string,
  user: Record<string, unknown>,
  etag: string,
): Promise<Response | undefined> {
  const headers = { accept: 'application/json', 'content-type': 'application/json', 'if-match': etag };
  try {
    return await ctx.client.expect({ method: 'PUT', path: refPath(ref), headers, body: JSON.stringify(user) }, [200]);
  } catch (error) {
    if (error instanceof StatusError && error.status === 412) return undefined;
    throw error;
  }
}

/** The top-level members that differ between two versions, for the conflict's message. */
function changedFields(before: Record<string, unknown>, after: Record<string, unknown>): string {
  const names = new Set([...Object.keys(before), ...Object.keys(after)]);
  const changed = [...names].filter((n) => !sameJson(before[n], after[n]));
  return changed.length === 0 ? 'no field changed' : `changed: ${changed.join(', ')}`;
}

/** $VISUAL, else $EDITOR, else vi, as git and kubectl choose. */
function editorOf(env: NodeJS.ProcessEnv): string {
  return env.VISUAL?.trim() || env.EDITOR?.trim() || 'vi';
}

/**
 * Runs the editor on `file` through the shell (an editor variable may carry flags: `code --wait`); a failure stops the
 * edit.
 */
function runEditor(editor: string, file: string, env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('/bin/sh', ['-c', `${editor} "$1"`, 'usersctl-edit', file], { stdio: 'inherit', env });
    child.on('error', (error) => reject(new CliUsageError(`cannot run the editor ${editor}: ${error.message}`)));
    child.on('exit', (code, signal) => {
      if (code === 0) return resolve();
      const how = signal !== null ? `was stopped by ${signal}` : `exited ${code}`;
      reject(new CliUsageError(`the editor ${editor} ${how}; nothing was saved`));
    });
  });
}
