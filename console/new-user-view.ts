/**
 * A new user: a name, an optional alias and optional more fields as JSON.
 * With an alias it is `PUT /users/{alias}` with `If-None-Match: *` (create
 * only: an alias that names someone already is refused, not overwritten);
 * without, `POST /users/new` with an Idempotency-Key, so a retry after a
 * lost answer makes no second user.
 */
import { parseRef } from '../shared/user.js';
import { ApiError, call, idempotencyKey, userIdOfUri } from './api.js';
import { announce, h, replace } from './dom.js';
import { refusalOf } from './refusals.js';
import { parseObject } from './user-view.js';
import { canWrite, focusHeading, READ_ONLY, type ViewContext } from './view.js';

export function showNewUser(view: ViewContext): void {
  const writable = canWrite(view.session);
  const heading = h('h1', {}, 'New user');
  const error = h('div', { class: 'error', role: 'alert', hidden: true });
  const name = h('input', { id: 'new-name', required: true, maxlength: 200, autocomplete: 'off' });
  const alias = h('input', {
    id: 'new-alias',
    autocomplete: 'off',
    autocapitalize: 'none',
    spellcheck: 'false',
    'aria-describedby': 'new-alias-hint',
  });
  const more = h('textarea', {
    id: 'new-more',
    class: 'json',
    spellcheck: 'false',
    'aria-describedby': 'new-more-hint',
  });
  more.value = '{}';
  const create = h(
    'button',
    { type: 'submit', class: 'primary', disabled: !writable, title: writable ? undefined : READ_ONLY },
    'Create',
  );
  // One key per user being made: a retry of the same form is the same request.
  let key = idempotencyKey();
  const fail = (refusal: unknown) => {
    replace(error, refusal instanceof HTMLElement ? refusal : refusalOf(refusal));
    error.hidden = false;
  };
  const submit = async (event: Event) => {
    event.preventDefault();
    error.hidden = true;
    const fields = parseObject(more.value);
    if (typeof fields === 'string') return fail(new Error(`More fields: ${fields}`));
    const body = { ...fields, name: name.value };
    const aliasText = alias.value.trim();
    if (aliasText !== '' && parseRef(aliasText).kind !== 'alias')
      return fail(new Error('An alias is 1 to 200 of A-Z a-z 0-9 . _ ~ - and not only digits.'));
    create.disabled = true;
    try {
      const answer =
        aliasText === ''
          ? await call('POST', 'users/new', { json: body, headers: { 'Idempotency-Key': key } })
          : await call('PUT', `users/${encodeURIComponent(aliasText)}`, {
              json: body,
              headers: { 'If-None-Match': '*' },
            });
      const id = userIdOfUri(answer.headers.get('Location'));
      key = idempotencyKey();
      announce(`${name.value} was created.`);
      location.hash = id === undefined ? '#/users' : `#/users/${id}`;
    } catch (refusal) {
      if (refusal instanceof ApiError && refusal.status === 412) return fail(await aliasTaken(aliasText));
      fail(refusal);
    } finally {
      create.disabled = !writable;
    }
  };
  replace(
    view.main,
    heading,
    !writable && h('p', { class: 'hint' }, READ_ONLY),
    error,
    h(
      'form',
      { class: 'stack new-user', on: { submit } },
      h('label', { for: 'new-name' }, 'Name'),
      name,
      h('label', { for: 'new-alias' }, 'Alias (optional)'),
      alias,
      h('p', { id: 'new-alias-hint', class: 'hint' }, 'A name for the URL, such as alice: letters, digits, . _ ~ -'),
      h('label', { for: 'new-more' }, 'More fields (JSON)'),
      more,
      h('p', { id: 'new-more-hint', class: 'hint' }, 'Any other members of the user, as a JSON object.'),
      h('div', { class: 'actions' }, create, h('a', { href: '#/users' }, 'Cancel')),
    ),
  );
  focusHeading(heading, 'New user');
  name.focus();
}

/** A create through an alias refused because the alias names a user: that user, linked. */
async function aliasTaken(alias: string): Promise<Error | HTMLElement> {
  try {
    const { body } = await call<{ id: number }>('GET', `users/${encodeURIComponent(alias)}`);
    return h(
      'p',
      {},
      `The alias ${alias} already names `,
      h('a', { href: `#/users/${body.id}` }, `user ${body.id}`),
      '.',
    );
  } catch {
    return new Error(`The alias ${alias} is taken.`);
  }
}
