/**
 * API tokens, for admins: the list (`GET /tokens`), a new one (`POST
 * /tokens`: its secret is shown once, with a Copy button) and revoking one
 * (`DELETE /tokens/{id}`, after asking).
 */
import { ApiError, call } from './api.js';
import { confirmAction } from './dialog.js';
import { announce, h, replace } from './dom.js';
import { refusalOf } from './refusals.js';
import { canWrite, focusHeading, type ViewContext } from './view.js';

interface Token {
  readonly id: string;
  readonly name: string;
  readonly role: string;
  readonly actsAs: string | null;
  readonly createdBy: string;
  readonly createdAt: string;
  readonly expiresAt: string | null;
  readonly expired: boolean;
  /** In the answer to its creation only. */
  readonly token?: string;
}

/** The lifetimes offered, in seconds; '' for a token that does not expire. */
const LIFETIMES: [string, string][] = [
  ['', 'Never'],
  [String(86_400), '1 day'],
  [String(30 * 86_400), '30 days'],
  [String(90 * 86_400), '90 days'],
  [String(365 * 86_400), '1 year'],
];

export function showTokens(view: ViewContext): void {
  const heading = h('h1', {}, 'API tokens');
  if (!canWrite(view.session)) {
    replace(view.main, heading, h('p', {}, 'Only an admin manages API tokens.'));
    return focusHeading(heading, 'API tokens');
  }
  const error = h('div', { class: 'error', role: 'alert', hidden: true });
  const created = h('section', { class: 'notice ok', hidden: true, 'aria-labelledby': 'created-title' });
  const list = h('tbody');
  const fail = (refusal: unknown) => {
    replace(error, refusalOf(refusal));
    error.hidden = false;
  };

  const refresh = async () => {
    try {
      const { body } = await call<{ items: Token[] }>('GET', 'tokens');
      if (!view.active()) return;
      replace(
        list,
        ...body.items.map((token) => tokenRow(token, () => void revoke(token))),
        body.items.length === 0 && h('tr', {}, h('td', { colspan: 7 }, 'No API tokens yet.')),
      );
    } catch (refusal) {
      fail(refusal);
    }
  };

  const revoke = async (token: Token) => {
    const sure = await confirmAction(
      'Revoke this token?',
      `Revoke the API token ${token.name}? Scripts using it, and tokens made with it, stop working at once.`,
      'Yes, revoke',
    );
    if (!sure) return;
    error.hidden = true;
    try {
      await call('DELETE', `tokens/${token.id}`);
      announce(`The token ${token.name} was revoked.`);
    } catch (refusal) {
      if (!(refusal instanceof ApiError && refusal.status === 404)) fail(refusal);
    }
    await refresh();
  };

  const name = h('input', {
    id: 'token-name',
    required: true,
    pattern: '[A-Za-z0-9._\\-]{1,64}',
    maxlength: 64,
    autocomplete: 'off',
    'aria-describedby': 'token-name-hint',
  });
  const role = h(
    'select',
    { id: 'token-role' },
    h('option', { value: 'reader' }, 'reader'),
    h('option', { value: 'admin' }, 'admin'),
  );
  const lifetime = h(
    'select',
    { id: 'token-expires' },
    ...LIFETIMES.map(([value, text]) => h('option', { value }, text)),
  );
  lifetime.value = String(90 * 86_400);
  const submit = async (event: Event) => {
    event.preventDefault();
    error.hidden = true;
    try {
      const request: Record<string, unknown> = { name: name.value, role: role.value };
      if (lifetime.value !== '') request.expiresIn = Number(lifetime.value);
      const { body } = await call<Token>('POST', 'tokens', { json: request });
      showCreated(created, body);
      name.value = '';
      await refresh();
    } catch (refusal) {
      fail(refusal);
      name.focus();
    }
  };

  replace(
    view.main,
    heading,
    h(
      'p',
      { class: 'hint' },
      'Scripts send a token as Authorization: Bearer TOKEN. It acts with its role, never more than its account’s.',
    ),
    error,
    created,
    h('h2', {}, 'Create a token'),
    h(
      'form',
      { class: 'inline-form', on: { submit } },
      h('div', {}, h('label', { for: 'token-name' }, 'Token name'), name),
      h('div', {}, h('label', { for: 'token-role' }, 'Role'), role),
      h('div', {}, h('label', { for: 'token-expires' }, 'Expires in'), lifetime),
      h('button', { type: 'submit', class: 'primary' }, 'Create token'),
    ),
    h(
      'p',
      { id: 'token-name-hint', class: 'hint' },
      'A name of 1 to 64 of A-Z a-z 0-9 . _ -, unique among the tokens.',
    ),
    h('h2', {}, 'Tokens'),
    h(
      'div',
      { class: 'table-wrap', tabindex: 0, role: 'region', 'aria-label': 'Tokens table' },
      h(
        'table',
        {},
        h('caption', { class: 'visually-hidden' }, 'API tokens'),
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            ...['Name', 'Role', 'Acts as', 'Created by', 'Created', 'Expires', ''].map((text) =>
              h('th', { scope: 'col' }, text === '' ? h('span', { class: 'visually-hidden' }, 'Actions') : text),
            ),
          ),
        ),
        list,
      ),
    ),
  );
  focusHeading(heading, 'API tokens');
  void refresh();
}

function tokenRow(token: Token, revoke: () => void): HTMLTableRowElement {
  return h(
    'tr',
    { class: token.expired ? 'deleted' : undefined },
    h('td', {}, token.name),
    h('td', {}, token.role),
    h('td', {}, token.actsAs ?? 'nothing (account removed)'),
    h('td', {}, token.createdBy),
    h('td', {}, dateText(token.createdAt)),
    h(
      'td',
      {},
      token.expired
        ? `expired ${dateText(token.expiresAt)}`
        : token.expiresAt === null
          ? 'never'
          : dateText(token.expiresAt),
    ),
    h(
      'td',
      {},
      h(
        'button',
        { type: 'button', class: 'danger', 'aria-label': `Revoke ${token.name}`, on: { click: revoke } },
        'Revoke',
      ),
    ),
  );
}

function dateText(iso: string | null): string {
  if (iso === null) return '';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString('en', { dateStyle: 'medium', timeStyle: 'short' });
}

/** The new token's secret, once: in a read-only field with a Copy button. */
function showCreated(section: HTMLElement, token: Token): void {
  const secret = h('input', {
    id: 'token-secret',
    readonly: true,
    value: token.token ?? '',
    'aria-describedby': 'token-once',
  });
  const copied = h('span', { role: 'status' });
  const copy = h('button', { type: 'button' }, 'Copy');
  copy.addEventListener('click', async () => {
    secret.select();
    try {
      await navigator.clipboard.writeText(secret.value);
    } catch {
      // No clipboard API outside a secure context: the selection is there to copy by hand.
      document.execCommand('copy');
    }
    copied.textContent = 'Copied.';
  });
  replace(
    section,
    h('h2', { id: 'created-title', tabindex: -1 }, `Token ${token.name} created`),
    h('p', { id: 'token-once' }, 'Copy the secret now: it is shown this once, and the server keeps only its hash.'),
    h('label', { for: 'token-secret' }, 'Secret'),
    h('div', { class: 'secret' }, secret, copy, copied),
  );
  section.hidden = false;
  section.querySelector<HTMLElement>('h2')!.focus();
}
