/**
 * The table of users: id, alias, name and a column per declared path; the
 * filter box (the server's filter, or plain words), sort by a column's
 * header (the server's `sort`), the count of matches (`count=true`), pages
 * by keyset as the person scrolls or asks for more, and the feed's changes
 * shown as they happen. The filter and sort are kept in the address
 * (`#/users?q=...&sort=...`), so a reload or a link shows the same list.
 */
import { ApiError, call } from './api.js';
import { announce, h, replace } from './dom.js';
import type { FeedEvent } from './feed.js';
import { filterFor, referenceIn } from './filter-text.js';
import { displayValue, type User, valueAt } from './user-data.js';
import { canWrite, focusHeading, READ_ONLY, type ViewContext } from './view.js';

/** Users a page asks for: a screenful and more, in one request. */
const PAGE = 100;
/** How long typing pauses before the filter is sent. */
const TYPING_MS = 300;
/** How long the count waits after a change before it is asked again. */
const RECOUNT_MS = 500;

interface UserPage {
  readonly items: readonly User[];
  readonly aliases?: Record<string, string>;
  readonly next: string | null;
  readonly total?: number;
}

interface Column {
  /** `id`, `alias`, `name` or a declared path. */
  readonly key: string;
  /** Whether the server sorts on it (alias is not a member of the user). */
  readonly sortable: boolean;
}

/** The view's query, as in the address: the box's text and the sort (`name`, `-name`, `-id`; '' for id order). */
interface Query {
  readonly text: string;
  readonly sort: string;
}

function queryOfHash(): Query {
  const params = new URLSearchParams(location.hash.replace(/^#\/users\??/, ''));
  return { text: params.get('q') ?? '', sort: params.get('sort') ?? '' };
}

function hashOf(query: Query): string {
  const params = new URLSearchParams();
  if (query.text !== '') params.set('q', query.text);
  if (query.sort !== '') params.set('sort', query.sort);
  const text = params.toString();
  return `#/users${text === '' ? '' : `?${text}`}`;
}

export function showUsers(view: ViewContext): void {
  new UsersTable(view).show();
}

class UsersTable {
  private query = queryOfHash();
  private columns: Column[] = [];
  private declared: readonly string[] = [];
  /** Rows by user id, for the feed's changes. */
  private readonly rows = new Map<number, HTMLTableRowElement>();
  private next: string | null = null;
  private loading = false;
  /** Changes that came while a page loaded (it may have been read before them): applied once its rows are in. */
  private held: FeedEvent[] = [];
  /** Bumped at every new query: answers to an older one are dropped. */
  private generation = 0;
  private typing: number | undefined;
  private recount: number | undefined;
  /** The filter sent for the current query; undefined for none. */
  private filter: string | undefined;

  private readonly heading = h('h1', {}, 'Users');
  private readonly input = h('input', {
    id: 'filter',
    type: 'search',
    autocomplete: 'off',
    spellcheck: 'false',
    'aria-describedby': 'filter-help filter-error',
  });
  private readonly help = h(
    'p',
    { id: 'filter-help', class: 'hint' },
    'Words are looked for in the name and the declared fields; an alias or an id finds its user. Or write a filter: ',
    h('code', {}, 'name sw "A" and age gt 30'),
    '.',
  );
  private readonly filterError = h('div', { id: 'filter-error', role: 'alert', class: 'error', hidden: true });
  private readonly count = h('p', { class: 'count', role: 'status' });
  private readonly head = h('tr');
  private readonly body = h('tbody');
  private readonly table = h(
    'table',
    { class: 'users' },
    h('caption', { class: 'visually-hidden' }, 'Users'),
    h('thead', {}, this.head),
    this.body,
  );
  private readonly more = h('button', { type: 'button', class: 'more', hidden: true }, 'Load more');
  private readonly progress = h('p', { class: 'progress', role: 'status' });

  constructor(private readonly view: ViewContext) {}

  show(): void {
    const { view } = this;
    const writable = canWrite(view.session);
    const newUser = h(
      'button',
      {
        type: 'button',
        class: 'primary',
        disabled: !writable,
        title: writable ? undefined : READ_ONLY,
        on: { click: () => (location.hash = '#/new') },
      },
      'New user',
    );
    this.input.value = this.query.text;
    this.input.addEventListener('input', () => this.typed());
    const form = h(
      'form',
      { role: 'search', class: 'filter', on: { submit: (event: Event) => this.submitted(event) } },
      h('label', { for: 'filter' }, 'Filter'),
      this.input,
    );
    this.more.addEventListener('click', () => void this.loadMore());
    replace(
      view.main,
      h('div', { class: 'title-row' }, this.heading, newUser),
      form,
      this.help,
      this.filterError,
      this.count,
      h('div', { class: 'table-wrap', tabindex: 0, role: 'region', 'aria-label': 'Users table' }, this.table),
      this.progress,
      this.more,
    );
    focusHeading(this.heading, 'Users');
    // Scrolling near the end asks for the next page.
    const observer = new IntersectionObserver((entries) => {
      if (entries.some((entry) => entry.isIntersecting)) void this.loadMore();
    });
    observer.observe(this.more);
    view.onLeave(() => {
      observer.disconnect();
      clearTimeout(this.typing);
      clearTimeout(this.recount);
    });
    view.onLeave(view.feed.listen((event) => this.changed(event)));
    void view.declared.then((declared) => {
      this.declared = declared;
      this.columns = [
        { key: 'id', sortable: true },
        { key: 'alias', sortable: false },
        { key: 'name', sortable: true },
        ...declared.filter((path) => path !== 'id' && path !== 'name').map((key) => ({ key, sortable: true })),
      ];
      void this.load();
    });
  }

  private typed(): void {
    clearTimeout(this.typing);
    this.typing = window.setTimeout(() => this.search(), TYPING_MS);
  }

  private submitted(event: Event): void {
    event.preventDefault();
    clearTimeout(this.typing);
    this.search();
  }

  private search(): void {
    if (this.input.value === this.query.text) return;
    this.setQuery({ ...this.query, text: this.input.value });
  }

  private setQuery(query: Query): void {
    this.query = query;
    // replaceState fires no hashchange: the view stays, the address follows.
    history.replaceState(null, '', hashOf(query));
    void this.load();
  }

  /** The header row: each sortable column's header is a button that sorts on it (`aria-sort` says how). */
  private drawHead(): void {
    const { sort } = this.query;
    const current = sort === '' ? 'id' : sort.replace(/^-/, '');
    const descending = sort.startsWith('-');
    replace(
      this.head,
      ...this.columns.map((column) => {
        const sorted = column.key === current;
        const header = h('th', {
          scope: 'col',
          'aria-sort': sorted ? (descending ? 'descending' : 'ascending') : column.sortable ? 'none' : undefined,
        });
        if (!column.sortable) header.textContent = column.key;
        else
          header.appendChild(
            h('button', { type: 'button', class: 'sort', on: { click: () => this.sortOn(column.key) } }, column.key),
          );
        return header;
      }),
    );
  }

  /** Ascending first; the sorted column again turns the order round. Id order is the listing's own (no `sort`). */
  private sortOn(key: string): void {
    const { sort } = this.query;
    const current = sort === '' ? 'id' : sort.replace(/^-/, '');
    const descending = key === current && !sort.startsWith('-');
    const next = descending ? `-${key}` : key === 'id' ? '' : key;
    this.setQuery({ ...this.query, sort: next });
  }

  /** The first page of the current query, its count, and the user a plain word names. */
  private async load(): Promise<void> {
    const generation = ++this.generation;
    this.loading = true;
    this.held = [];
    this.filter = filterFor(this.query.text, this.declared);
    this.drawHead();
    replace(this.body);
    this.rows.clear();
    this.next = null;
    this.more.hidden = true;
    this.showFilterError(undefined);
    replace(this.count, 'Counting…');
    // A page read after the feed connected misses none of the changes after it.
    await this.view.feed.opened;
    if (generation !== this.generation) return;
    const params = new URLSearchParams({ limit: String(PAGE), aliases: 'true' });
    if (this.filter !== undefined) params.set('filter', this.filter);
    if (this.query.sort !== '') params.set('sort', this.query.sort);
    void this.countMatches(generation);
    const reference = referenceIn(this.query.text);
    const named = reference === undefined ? undefined : this.lookUp(reference);
    await this.fetchPage(`users?${params}`, generation, named);
  }

  /** The user an id or alias names, with its alias; undefined when none does. */
  private async lookUp(reference: string): Promise<{ user: User; alias?: string } | undefined> {
    try {
      const { body: user } = await call<User>('GET', `users/${encodeURIComponent(reference)}`);
      const listed = await call<UserPage>('GET', `users?after=${user.id - 1}&limit=1&aliases=true`);
      return { user, alias: listed.body.aliases?.[String(user.id)] };
    } catch {
      return undefined;
    }
  }

  private async countMatches(generation: number): Promise<void> {
    const params = new URLSearchParams({ count: 'true', limit: '1' });
    if (this.filter !== undefined) params.set('filter', this.filter);
    try {
      const { body } = await call<UserPage>('GET', `users?${params}`);
      if (generation !== this.generation || body.total === undefined) return;
      const noun =
        this.filter === undefined ? (body.total === 1 ? 'user' : 'users') : body.total === 1 ? 'match' : 'matches';
      replace(this.count, `${body.total.toLocaleString('en')} ${noun}`);
    } catch (error) {
      if (generation === this.generation && !(error instanceof ApiError && error.is('invalid-filter')))
        replace(this.count, '');
    }
  }

  private async loadMore(): Promise<void> {
    if (this.next === null || this.loading) return;
    await this.fetchPage(this.next, this.generation, undefined);
  }

  private async fetchPage(
    path: string,
    generation: number,
    named: Promise<{ user: User; alias?: string } | undefined> | undefined,
  ): Promise<void> {
    this.loading = true;
    replace(this.progress, 'Loading…');
    try {
      const [{ body: page }, found] = await Promise.all([call<UserPage>('GET', path), named]);
      if (generation !== this.generation) return;
      if (found !== undefined) this.addRow(found.user, found.alias, 'named');
      for (const user of page.items) if (!this.rows.has(user.id)) this.addRow(user, page.aliases?.[String(user.id)]);
      this.next = page.next;
      this.more.hidden = page.next === null;
      // What bench/console-bench.ts measures: when each page is in the table.
      performance.mark('users-page');
      replace(this.progress, this.rows.size === 0 ? 'No users.' : '');
    } catch (error) {
      if (generation !== this.generation) return;
      // A first page that failed shows no rows to change; after a later one, the rows shown take the changes held.
      if (this.rows.size === 0) this.held = [];
      replace(this.progress, '');
      this.showFilterError(error);
      if (error instanceof ApiError && error.is('invalid-filter')) replace(this.count, '');
      return;
    } finally {
      if (generation === this.generation) {
        this.loading = false;
        for (const event of this.held.splice(0)) this.changed(event);
      }
    }
    // A filter's page may be short (its scan is bounded): go on while the end is still in sight.
    if (this.next !== null && inView(this.more)) await this.loadMore();
  }

  /** Says what is wrong with the filter: the server's words, and the text with the column marked. */
  private showFilterError(error: unknown): void {
    this.input.removeAttribute('aria-invalid');
    if (error === undefined) {
      this.filterError.hidden = true;
      replace(this.filterError);
      return;
    }
    const message = error instanceof Error ? error.message : String(error);
    const column = error instanceof ApiError ? error.problem.column : undefined;
    const text = this.filter ?? '';
    const marked =
      typeof column === 'number' && column >= 1 && column <= text.length + 1
        ? h(
            'pre',
            { class: 'filter-text', 'aria-hidden': 'true' },
            text.slice(0, column - 1),
            h('mark', {}, text.slice(column - 1, column) || ' '),
            text.slice(column),
          )
        : undefined;
    this.input.setAttribute('aria-invalid', 'true');
    replace(this.filterError, h('p', {}, message), marked);
    this.filterError.hidden = false;
  }

  private addRow(user: User, alias: string | undefined, extra?: string): void {
    const row = h('tr', { 'data-id': user.id, class: extra });
    this.fillRow(row, user, alias);
    this.rows.set(user.id, row);
    if (extra === 'named') this.body.prepend(row);
    else this.body.appendChild(row);
  }

  private fillRow(row: HTMLTableRowElement, user: User, alias: string | undefined): void {
    row.dataset.alias = alias ?? '';
    replace(
      row,
      ...this.columns.map((column) => {
        if (column.key === 'id') return h('td', { class: 'num' }, String(user.id));
        if (column.key === 'alias') return h('td', {}, alias ?? '');
        if (column.key === 'name')
          return h('td', {}, h('a', { href: `#/users/${user.id}` }, displayValue(user.name) || `User ${user.id}`));
        return h('td', {}, displayValue(valueAt(user, column.key)));
      }),
    );
  }

  /** A change from the feed: a shown user updated or marked deleted, a new one added where the order puts it last. */
  private changed(event: FeedEvent): void {
    if (event === 'reset') return void this.load();
    if (this.loading) return void this.held.push(event);
    if (event.op === 'delete' || event.op === 'move') this.markDeleted(event.op === 'move' ? event.from! : event.id);
    if (event.op !== 'delete' && event.user !== undefined) this.updated(event.user as User);
    if (this.filter === undefined) {
      clearTimeout(this.recount);
      const generation = this.generation;
      this.recount = window.setTimeout(() => void this.countMatches(generation), RECOUNT_MS);
    }
  }

  /** The alias of a user the feed brought (a change carries none), in its row. */
  private async fillAlias(row: HTMLTableRowElement, id: number): Promise<void> {
    try {
      const { body } = await call<UserPage>('GET', `users?after=${id - 1}&limit=1&aliases=true`);
      const alias = body.aliases?.[String(id)];
      const cell = row.cells[this.columns.findIndex((c) => c.key === 'alias')];
      if (alias === undefined || cell === undefined) return;
      row.dataset.alias = alias;
      cell.textContent = alias;
    } catch {
      // The row stays without its alias; a reload shows it.
    }
  }

  private markDeleted(id: number): void {
    const row = this.rows.get(id);
    if (row === undefined || row.classList.contains('deleted')) return;
    row.classList.add('deleted');
    const link = row.querySelector('a');
    link?.after(h('span', { class: 'badge' }, ' (deleted)'));
    announce(`User ${id} was deleted.`);
  }

  private updated(user: User): void {
    const row = this.rows.get(user.id);
    if (row !== undefined) {
      row.classList.remove('deleted');
      this.fillRow(row, user, row.dataset.alias || undefined);
      flash(row);
      return;
    }
    // A user not shown: in id order with every page loaded, it belongs at the end.
    if (this.filter === undefined && this.query.sort === '' && this.next === null && !this.loading) {
      this.addRow(user, undefined);
      const row = this.rows.get(user.id)!;
      flash(row);
      void this.fillAlias(row, user.id);
    }
  }
}

/** Marks a row changed for a moment (the style sheet shows it). */
function flash(row: HTMLElement): void {
  row.classList.remove('changed');
  void row.offsetWidth;
  row.classList.add('changed');
}

function inView(element: HTMLElement): boolean {
  if (element.hidden) return false;
  const box = element.getBoundingClientRect();
  return box.top < window.innerHeight && box.bottom > 0;
}
