/**
 * A user's page: its fields as a form and its whole JSON as text, kept in
 * step; Save (PUT with If-Match, so nobody's change is overwritten
 * unseen); Delete, after asking. When someone else changed the user
 * meanwhile (412), both versions are shown, and the person reloads or
 * re-applies their change onto the saved version (a merge patch). The
 * feed shows changes made elsewhere as they happen, and a deletion.
 */
import { applyMergePatch, mergePatchBetween, sameJson } from '../shared/merge-patch.js';
import { ApiError, call } from './api.js';
import { confirmAction } from './dialog.js';
import { announce, h, replace } from './dom.js';
import { fieldOf, refusalOf } from './refusals.js';
import type { User } from './user-data.js';
import { canWrite, focusHeading, READ_ONLY, type ViewContext } from './view.js';

type Json = Record<string, unknown>;

export function showUser(view: ViewContext, id: number): void {
  new UserPage(view, id).show();
}

/** The JSON text the editor shows: two spaces of indent. */
function pretty(value: unknown): string {
  return JSON.stringify(value, null, 2);
}

/** Whether a member is shown as a field of the form (the JSON text holds them all). */
function isField(name: string, value: unknown): boolean {
  return name !== 'id' && (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean');
}

class UserPage {
  /** The version last read from the server, and its entity tag. */
  private saved: Json | undefined;
  private etag = '';
  private alias: string | undefined;
  /** What the editor holds: the saved version with the person's edits. */
  private draft: Json = {};
  private deleted = false;
  /** True while a PUT is under way. */
  private saving = false;
  /** Bumped at every read of the user: an answer to an older read, overtaken by a newer one, is dropped. */
  private reads = 0;
  /** The field names the form was drawn for, to redraw it only when they change. */
  private fieldNames = '';
  private readonly writable: boolean;

  private readonly heading = h('h1');
  private readonly notice = h('div', { class: 'notice', role: 'status', hidden: true });
  private readonly error = h('div', { class: 'error', role: 'alert', hidden: true });
  private readonly fields = h('fieldset', { class: 'fields' });
  private readonly json = h('textarea', {
    id: 'user-json',
    class: 'json',
    spellcheck: 'false',
    autocapitalize: 'none',
    'aria-describedby': 'json-error',
  });
  private readonly jsonError = h('p', { id: 'json-error', class: 'hint' });
  private readonly save = h('button', { type: 'submit', class: 'primary' }, 'Save');
  private readonly remove = h('button', { type: 'button', class: 'danger' }, 'Delete');
  private readonly conflict = h('section', { class: 'conflict', hidden: true, 'aria-labelledby': 'conflict-title' });

  constructor(
    private readonly view: ViewContext,
    private readonly id: number,
  ) {
    this.writable = canWrite(view.session);
  }

  show(): void {
    const { view } = this;
    this.heading.textContent = `User ${this.id}`;
    this.json.readOnly = !this.writable;
    this.json.addEventListener('input', () => this.jsonEdited());
    for (const button of [this.save, this.remove]) {
      button.disabled = true;
      if (!this.writable) button.title = READ_ONLY;
    }
    this.remove.addEventListener('click', () => void this.deleteUser());
    const form = h(
      'form',
      { class: 'user-form', on: { submit: (event: Event) => this.submitted(event) } },
      this.fields,
      h('div', { class: 'stack' }, h('label', { for: 'user-json' }, 'JSON'), this.json, this.jsonError),
      h('div', { class: 'actions' }, this.save, this.remove, h('a', { href: '#/users' }, 'Back to the users')),
    );
    replace(
      view.main,
      this.heading,
      !this.writable && h('p', { class: 'hint' }, READ_ONLY),
      this.notice,
      this.error,
      this.conflict,
      form,
    );
    focusHeading(this.heading, `User ${this.id}`);
    view.onLeave(
      view.feed.listen((event) => {
        if (event === 'reset') void this.changedElsewhere(undefined);
        else if (event.op === 'put' && event.id === this.id) void this.changedElsewhere(event.user);
        else if (event.id === this.id || event.from === this.id) this.markDeleted(true);
      }),
    );
    void this.load();
  }

  /** Reads the user, its tag and its alias, and shows them (the person's edits are replaced). */
  private async load(): Promise<void> {
    const read = ++this.reads;
    try {
      const [user, listed] = await Promise.all([
        call<User>('GET', `users/${this.id}`),
        call<{ aliases?: Record<string, string> }>('GET', `users?after=${this.id - 1}&limit=1&aliases=true`),
      ]);
      if (!this.view.active() || read !== this.reads) return;
      this.alias = listed.body.aliases?.[String(this.id)];
      this.adopt(user.body, user.headers.get('ETag') ?? '');
    } catch (error) {
      if (!this.view.active() || read !== this.reads) return;
      if (error instanceof ApiError && (error.status === 404 || error.status === 410)) return this.markDeleted(false);
      this.showError(error);
    }
  }

  /** `user` is the saved version now: the editor shows it. */
  private adopt(user: Json, etag: string): void {
    this.saved = user;
    this.etag = etag;
    this.draft = structuredClone(user);
    this.deleted = false;
    const name = typeof user.name === 'string' ? user.name : '';
    replace(
      this.heading,
      name === '' ? `User ${this.id}` : name,
      h('span', { class: 'hint' }, ` · id ${this.id}${this.alias === undefined ? '' : ` · alias ${this.alias}`}`),
    );
    document.title = `${name || `User ${this.id}`} · users-server`;
    this.save.disabled = this.remove.disabled = !this.writable;
    this.drawFields(true);
    this.json.value = pretty(this.draft);
    this.json.removeAttribute('aria-invalid');
    replace(this.jsonError);
  }

  /** Whether the editor holds changes not saved. */
  private get dirty(): boolean {
    return this.saved !== undefined && !sameJson(this.saved, this.draft);
  }

  /** The form's fields: `name` always (labelled Name), then each other member that is a string, number or boolean. */
  private drawFields(force: boolean): void {
    const names = ['name', ...Object.keys(this.draft).filter((k) => k !== 'name' && isField(k, this.draft[k]))];
    const key = JSON.stringify(names.map((n) => [n, typeof this.draft[n]]));
    if (!force && key === this.fieldNames) {
      // The same fields: their values follow the text, and the focus stays where it is.
      names.forEach((name, i) => this.setFieldValue(i, this.draft[name]));
      return;
    }
    this.fieldNames = key;
    replace(this.fields, h('legend', {}, 'Fields'), ...names.flatMap((name, i) => this.fieldRow(name, i)));
  }

  private fieldRow(name: string, index: number): HTMLElement[] {
    const value = this.draft[name];
    const id = `field-${index}`;
    const label = h('label', { for: id }, name === 'name' ? 'Name' : name);
    const input = h('input', { id, name, 'data-field': name });
    if (typeof value === 'boolean') input.type = 'checkbox';
    else if (typeof value === 'number') {
      input.type = 'number';
      input.step = 'any';
    }
    if (name === 'name') {
      input.required = true;
      input.maxLength = 200;
      input.autocomplete = 'off';
    }
    input.readOnly = !this.writable;
    if (input.type === 'checkbox') input.disabled = !this.writable;
    if (typeof value === 'boolean') input.checked = value;
    else input.value = value === undefined || value === null ? '' : String(value);
    input.addEventListener('input', () => this.fieldEdited(name, input));
    input.addEventListener('change', () => this.fieldEdited(name, input));
    return [label, input];
  }

  private setFieldValue(index: number, value: unknown): void {
    const input = this.fields.querySelector<HTMLInputElement>(`#field-${index}`);
    if (input === null || document.activeElement === input) return;
    if (input.type === 'checkbox') input.checked = value === true;
    else input.value = value === undefined || value === null ? '' : String(value);
  }

  private fieldEdited(name: string, input: HTMLInputElement): void {
    if (input.type === 'checkbox') this.draft[name] = input.checked;
    else if (input.type === 'number') {
      if (input.value === '' || !Number.isFinite(input.valueAsNumber))
        return input.setAttribute('aria-invalid', 'true');
      input.removeAttribute('aria-invalid');
      this.draft[name] = input.valueAsNumber;
    } else this.draft[name] = input.value;
    this.json.value = pretty(this.draft);
    this.json.removeAttribute('aria-invalid');
    replace(this.jsonError);
  }

  private jsonEdited(): void {
    const parsed = parseObject(this.json.value);
    if (typeof parsed === 'string') {
      this.json.setAttribute('aria-invalid', 'true');
      replace(this.jsonError, parsed);
      return;
    }
    this.json.removeAttribute('aria-invalid');
    replace(this.jsonError);
    this.draft = parsed;
    this.drawFields(false);
  }

  private submitted(event: Event): void {
    event.preventDefault();
    void this.saveUser();
  }

  private async saveUser(): Promise<void> {
    const parsed = parseObject(this.json.value);
    if (typeof parsed === 'string') {
      this.json.focus();
      return this.showError(new Error(`The JSON cannot be saved: ${parsed}`));
    }
    this.draft = parsed;
    this.hideMessages();
    this.save.disabled = true;
    this.saving = true;
    try {
      const answer = await call<Json>('PUT', `users/${this.id}`, {
        json: this.draft,
        headers: { 'If-Match': this.etag },
      });
      const etag = answer.headers.get('ETag');
      // The saved version is newer than any read still on its way.
      if (etag !== null) {
        this.reads++;
        this.adopt(answer.body, etag);
      } else await this.load();
      this.showNotice('Saved.', 'ok');
      announce('Saved.');
    } catch (error) {
      await this.refused(error);
    } finally {
      this.saving = false;
      this.save.disabled = !this.writable || this.deleted;
    }
  }

  private async refused(error: unknown): Promise<void> {
    if (!(error instanceof ApiError)) return this.showError(error);
    if (error.status === 412) return this.showConflict();
    if (error.status === 404 || error.status === 410) return this.markDeleted(true);
    this.showError(error);
    const field = fieldOf(error);
    const input =
      field === undefined ? null : this.fields.querySelector<HTMLInputElement>(`[data-field="${CSS.escape(field)}"]`);
    input?.setAttribute('aria-invalid', 'true');
    input?.focus();
  }

  /**
   * The user changed since the page read it (412): both versions side by
   * side, and the person's choice: take the saved one, or put their change
   * on top of it (the merge patch of their edits), to look over and save.
   */
  private async showConflict(): Promise<void> {
    let current: { body: Json; etag: string };
    try {
      const read = await call<Json>('GET', `users/${this.id}`);
      current = { body: read.body, etag: read.headers.get('ETag') ?? '' };
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return this.markDeleted(true);
      return this.showError(error);
    }
    const mine = this.draft;
    const base = this.saved;
    const reload = h('button', { type: 'button' }, 'Reload the saved version');
    const reapply = h('button', { type: 'button', class: 'primary' }, 'Re-apply my changes');
    reload.addEventListener('click', () => {
      this.hideMessages();
      this.adopt(current.body, current.etag);
      announce('The saved version is shown; your changes were discarded.');
    });
    reapply.addEventListener('click', () => {
      this.hideMessages();
      const merged = applyMergePatch(current.body, mergePatchBetween(base, mine)) as Json;
      this.adopt(current.body, current.etag);
      this.draft = merged;
      this.json.value = pretty(merged);
      this.drawFields(true);
      this.showNotice('Your changes are applied to the saved version: look them over, then Save.');
      this.save.focus();
    });
    replace(
      this.conflict,
      h('h2', { id: 'conflict-title', tabindex: -1 }, 'Someone else changed this user'),
      h(
        'p',
        {},
        'Your change was not saved. Compare the two versions, then reload the saved one or re-apply yours onto it.',
      ),
      h(
        'div',
        { class: 'versions' },
        h('figure', {}, h('figcaption', {}, 'Your version'), h('pre', { tabindex: 0 }, pretty(mine))),
        h('figure', {}, h('figcaption', {}, 'The saved version'), h('pre', { tabindex: 0 }, pretty(current.body))),
      ),
      h('div', { class: 'actions' }, reapply, reload),
    );
    this.conflict.hidden = false;
    this.conflict.querySelector<HTMLElement>('h2')!.focus();
  }

  private async deleteUser(): Promise<void> {
    const name = typeof this.saved?.name === 'string' ? this.saved.name : `user ${this.id}`;
    if (
      !(await confirmAction(
        'Delete this user?',
        `Delete ${name} (id ${this.id})? This cannot be undone.`,
        'Yes, delete',
      ))
    )
      return;
    this.hideMessages();
    try {
      await call('DELETE', `users/${this.id}`, { headers: { 'If-Match': this.etag } });
      announce(`${name} was deleted.`);
      location.hash = '#/users';
    } catch (error) {
      await this.refused(error);
    }
  }

  /**
   * A change made elsewhere: shown at once when nothing is being edited,
   * else said, for the person to choose. The feed also brings this page's
   * own saves, which are no news: the version saved, or the one being saved.
   */
  private async changedElsewhere(user: Json | undefined): Promise<void> {
    if (user !== undefined && (sameJson(user, this.saved) || (this.saving && sameJson(user, this.draft)))) return;
    if (!this.dirty) {
      await this.load();
      if (this.view.active() && !this.deleted)
        this.showNotice('Someone else changed this user: the page shows the change.');
      return;
    }
    const reload = h(
      'button',
      { type: 'button', on: { click: () => void this.load().then(() => this.hideMessages()) } },
      'Reload',
    );
    this.showNotice(
      'Someone else changed this user while you were editing. Reload to see it, or Save to compare both versions.',
      'warning',
      reload,
    );
  }

  private markDeleted(elsewhere: boolean): void {
    // A read still on its way holds a version from before the deletion.
    this.reads++;
    this.deleted = true;
    this.save.disabled = this.remove.disabled = true;
    const text = elsewhere ? 'This user was deleted.' : `There is no user ${this.id}: it was deleted, or never made.`;
    this.showNotice(text);
    this.heading.classList.add('deleted');
    if (this.saved === undefined) this.fields.hidden = true;
  }

  /** A notice: a warning, or with `ok` a plain confirmation; `extra` holds the buttons it offers. */
  private showNotice(text: string, kind: 'ok' | 'warning' = 'warning', ...extra: Node[]): void {
    replace(this.notice, h('p', {}, text), ...extra);
    this.notice.classList.toggle('ok', kind === 'ok');
    this.notice.hidden = false;
  }

  private showError(error: unknown): void {
    replace(this.error, refusalOf(error));
    this.error.hidden = false;
  }

  private hideMessages(): void {
    this.error.hidden = this.notice.hidden = this.conflict.hidden = true;
  }
}

/** The text as a JSON object, or what is wrong with it. */
export function parseObject(text: string): Json | string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return `not JSON (${error instanceof Error ? error.message : String(error)}).`;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'a user is a JSON object ({...}).';
  return value as Json;
}
