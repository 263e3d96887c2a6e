/**
 * The admin console's entry: who is signed in, the frame of the page (the
 * navigation, the account, Sign out, whether the feed is live) and the view
 * the address names (`#/users`, `#/users/7`, `#/new`, `#/tokens`,
 * `#/status`). Views are drawn into <main> and clean up when left.
 */
import { onSessionEnded } from './api.js';
import { byId, h, replace } from './dom.js';
import { Feed } from './feed.js';
import { currentSession, signOut, showSignIn, type Session } from './session.js';
import { declaredPaths } from './indexes.js';
import { showNewUser } from './new-user-view.js';
import { showStatus } from './status-view.js';
import { showTokens } from './tokens-view.js';
import { showUser } from './user-view.js';
import { showUsers } from './users-view.js';
import type { ViewContext } from './view.js';

interface Signed {
  readonly session: Session;
  readonly feed: Feed;
  readonly declared: Promise<readonly string[]>;
}

let signed: Signed | undefined;
let leaving: (() => void)[] = [];
let shown = 0;

const main = byId('main');
const header = byId('top');

async function start(): Promise<void> {
  onSessionEnded(() => void sessionEnded());
  // The skip link moves the focus; as a plain link it would change the address, which names the view.
  document.querySelector('.skip')?.addEventListener('click', (event) => {
    event.preventDefault();
    main.focus();
  });
  window.addEventListener('hashchange', () => route());
  const session = await currentSession().catch(() => undefined);
  if (session === undefined) return askSignIn(undefined);
  enter(session);
}

function askSignIn(notice: string | undefined): void {
  leave();
  signed?.feed.stop();
  signed = undefined;
  header.hidden = true;
  showSignIn(main, notice, enter);
}

async function sessionEnded(): Promise<void> {
  if (signed === undefined) return;
  // Another request may have answered 401 for its own reasons: the session itself says.
  if ((await currentSession().catch(() => signed?.session)) !== undefined) return;
  askSignIn('Your session ended; sign in again.');
}

function enter(session: Session): void {
  const live = h('span', { class: 'live', role: 'status' });
  const feed = new Feed(
    async () => (await currentSession().catch(() => session)) !== undefined,
    (state) => {
      live.dataset.state = state;
      live.textContent = state === 'live' ? 'Live' : 'Reconnecting…';
    },
  );
  signed = { session, feed, declared: declaredPaths() };
  feed.start();
  drawHeader(session, live);
  route();
}

function drawHeader(session: Session, live: HTMLElement): void {
  const links: [string, string][] = [
    ['#/users', 'Users'],
    ...(session.role === 'admin' ? [['#/tokens', 'Tokens'] as [string, string]] : []),
    ['#/status', 'Status'],
  ];
  const out = h(
    'button',
    {
      type: 'button',
      on: {
        click: async () => {
          await signOut().catch(() => undefined);
          askSignIn('Signed out.');
        },
      },
    },
    'Sign out',
  );
  replace(
    header,
    h('a', { class: 'brand', href: '#/users' }, 'users-server'),
    h(
      'nav',
      { 'aria-label': 'Console' },
      h('ul', {}, ...links.map(([href, text]) => h('li', {}, h('a', { href, 'data-nav': href }, text)))),
    ),
    h('span', { class: 'who' }, live, h('span', {}, `${session.name} (${session.role})`), out),
  );
  header.hidden = false;
}

function leave(): void {
  for (const cleanup of leaving) cleanup();
  leaving = [];
  shown++;
}

/** Shows the view of the address. */
function route(): void {
  if (signed === undefined) return;
  leave();
  const current = shown;
  const view: ViewContext = {
    main,
    ...signed,
    onLeave: (cleanup) => leaving.push(cleanup),
    active: () => current === shown,
  };
  const hash = location.hash;
  const nav = /^#\/(users|tokens|status)/.exec(hash)?.[1] ?? 'users';
  for (const link of header.querySelectorAll<HTMLAnchorElement>('a[data-nav]')) {
    if (link.dataset.nav === `#/${nav}`) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  const user = /^#\/users\/(\d+)$/.exec(hash);
  if (user !== null) return showUser(view, Number(user[1]));
  if (hash === '#/new') return showNewUser(view);
  if (hash === '#/tokens') return showTokens(view);
  if (hash === '#/status') return showStatus(view);
  showUsers(view);
}

void start();
