import type { Route } from './route.js';

interface PathGroup {
  /** The path's index in `Router.paths`: its slot in the request metrics. */
  readonly slot: number;
  readonly segments: readonly string[];
  /** For each segment: the parameter's name, or undefined for a literal segment. */
  readonly names: readonly (string | undefined)[];
  /**
   * How the path is matched: all literal segments, the path compared
   * whole; one parameter, the last segment, the text before it compared
   * ("/users/" of `/users/:ref`); else segment by segment.
   */
  readonly shape: 'literal' | 'last-parameter' | 'segments';
  /** The path's text before its first parameter; the whole path when it has none. */
  readonly prefix: string;
  /** The params object of the path's parameter values, in order (paramsFactory). */
  readonly params: (values: readonly string[]) => Record<string, string>;
  readonly byMethod: Map<string, Route>;
  /** The Allow field for this path (RFC 9110 section 10.2.1). */
  readonly allow: string;
}

/**
 * `slot` is the index of the matched path in `Router.paths`; -1 when no path
 * matched, and for a target that is neither origin-form nor absolute-form.
 */
type Match =
  | { kind: 'route'; route: Route; params: Record<string, string>; query: string; slot: number }
  | { kind: 'method-not-allowed'; allow: string; slot: number }
  | { kind: 'options'; allow: string; slot: number }
  | { kind: 'not-found'; slot: -1 }
  | { kind: 'bad-target'; slot: -1 };

const NOT_FOUND: Match = { kind: 'not-found', slot: -1 };
const BAD_TARGET: Match = { kind: 'bad-target', slot: -1 };

/**
 * Matches request targets against a table of routes. Paths with only
 * literal segments are tried before paths with parameters, so `/users/new`
 * wins over `/users/:ref`. HEAD is served by the GET route; the handler's
 * response loses its body in node:http. A known path with another method
 * gives the `Allow` field built from the same table.
 */
export class Router {
  /** Groups by segment count, literal paths first within each. */
  private readonly bySegments: PathGroup[][] = [];
  /** The distinct path patterns of the table, in table order. */
  readonly paths: readonly string[];
  /** Every method some path takes, for `OPTIONS *` (the server as a whole). */
  readonly allowAnywhere: string;

  constructor(readonly routes: readonly Route[]) {
    const byPath = new Map<string, Route[]>();
    for (const route of routes) byPath.set(route.path, [...(byPath.get(route.path) ?? []), route]);
    this.paths = [...byPath.keys()];
    const groups = [...byPath].map(([path, group], slot) => {
      const methods = group.map((r) => r.method);
      if (methods.includes('GET')) methods.push('HEAD');
      methods.push('OPTIONS');
      const segments = path.split('/').slice(1);
      const names = segments.map((s) => (s.startsWith(':') ? s.slice(1) : undefined));
      const shape = shapeOf(names);
      return {
        slot,
        segments,
        names,
        shape,
        prefix: shape === 'literal' ? path : path.slice(0, path.indexOf('/:') + 1),
        params: paramsFactory(names.filter((name) => name !== undefined)),
        byMethod: new Map(group.map((r) => [r.method, r])),
        allow: methods.join(', '),
      };
    });
    this.allowAnywhere = [...new Set(groups.flatMap((g) => g.allow.split(', ')))].join(', ');
    const literal = (g: PathGroup) => g.names.every((name) => name === undefined);
    for (const group of [...groups.filter(literal), ...groups.filter((g) => !literal(g))]) {
      (this.bySegments[group.segments.length] ??= []).push(group);
    }
  }

  /**
   * The route a request target (`req.url`) names, with its params and
   * query; `bad-target` for a target `splitTarget` refuses.
   */
  match(method: string, target: string): Match {
    const slashes = plainPathSlashes(target);
    if (slashes > 0) return this.matchPath(method, target, slashes, '');
    const split = splitTarget(target);
    if (split === undefined) return BAD_TARGET;
    return this.matchPath(method, split.path, slashesOf(split.path), split.query);
  }

  /** `path` starts with "/" and has `slashes` of them. */
  private matchPath(method: string, path: string, slashes: number, query: string): Match {
    const groups = this.bySegments[slashes];
    if (groups === undefined) return NOT_FOUND;
    for (const group of groups) {
      const params = matchGroup(group, path);
      if (params === undefined) continue;
      const route = group.byMethod.get(method === 'HEAD' ? 'GET' : method);
      if (route !== undefined) return { kind: 'route', route, params, query, slot: group.slot };
      if (method === 'OPTIONS') return { kind: 'options', allow: group.allow, slot: group.slot };
      return { kind: 'method-not-allowed', allow: group.allow, slot: group.slot };
    }
    return NOT_FOUND;
  }
}

/**
 * The slashes of a target that is a plain path (origin-form, no query,
 * fragment or percent-encoding: `/users/12`, what clients send most), or 0
 * for any other target: a plain path is its own path, matched without
 * `splitTarget` and the copy and object it makes.
 */
function plainPathSlashes(target: string): number {
  if (target.charCodeAt(0) !== 0x2f) return 0;
  let slashes = 0;
  for (let i = 0; i < target.length; i++) {
    const c = target.charCodeAt(i);
    if (c === 0x2f) slashes++;
    else if (c === 0x3f || c === 0x23 || c === 0x25) return 0;
  }
  return slashes;
}

function slashesOf(path: string): number {
  let slashes = 0;
  for (let i = 0; i < path.length; i++) if (path.charCodeAt(i) === 0x2f) slashes++;
  return slashes;
}

function shapeOf(names: readonly (string | undefined)[]): PathGroup['shape'] {
  const parameters = names.filter((name) => name !== undefined).length;
  if (parameters === 0) return 'literal';
  return parameters === 1 && names.at(-1) !== undefined ? 'last-parameter' : 'segments';
}

/**
 * The params of `path` (with as many segments as the group's) when it is
 * one of the group's; undefined when not. The shapes of most paths are
 * matched by one comparison: the per-segment walk costs a GET by id about
 * 1,500 instructions more (2%).
 */
function matchGroup(group: PathGroup, path: string): Record<string, string> | undefined {
  switch (group.shape) {
    case 'literal':
      return path === group.prefix ? group.params(NO_VALUES) : undefined;
    case 'last-parameter':
      if (path.length === group.prefix.length || !path.startsWith(group.prefix)) return undefined;
      return group.params([path.slice(group.prefix.length)]);
    case 'segments':
      return matchSegments(group, path);
  }
}

/**
 * Matches a path with as many segments as the group's, segment by segment
 * in place: no array of segments is made per request.
 */
function matchSegments(group: PathGroup, path: string): Record<string, string> | undefined {
  let values: string[] | undefined;
  let start = 1;
  for (let i = 0; i < group.segments.length; i++) {
    let end = start;
    while (end < path.length && path.charCodeAt(end) !== 0x2f) end++;
    const name = group.names[i];
    if (name !== undefined) {
      if (end === start) return undefined;
      (values ??= []).push(path.slice(start, end));
    } else {
      const literal = group.segments[i]!;
      if (end - start !== literal.length || !path.startsWith(literal, start)) return undefined;
    }
    start = end + 1;
  }
  return group.params(values ?? NO_VALUES);
}

const NO_VALUES: readonly string[] = [];

/** A function that makes the params object of a path's parameters from their values, named as in the route table. */
function paramsFactory(names: readonly string[]): (values: readonly string[]) => Record<string, string> {
  return (values) => {
    const params: Record<string, string> = {};
    for (let i = 0; i < names.length; i++) params[names[i]!] = values[i]!;
    return params;
  };
}

const UNRESERVED_ESCAPE = /%(?:2[DEde]|3\d|4[1-9A-Fa-f]|5[0-9Aa]|5[Ff]|6[1-9A-Fa-f]|7[0-9Aa]|7[Ee])/g;

/**
 * Splits a request target into path and query. Accepts origin-form and, as
 * RFC 9112 section 3.2.2 requires of servers, absolute-form (the path of the
 * URI is used). Percent-encoded unreserved characters are decoded (RFC 3986
 * section 6.2.2.2), so `/users/%61lice` routes like `/users/alice`. Returns
 * undefined for a target that is neither (asterisk-form, authority-form, junk).
 */
function splitTarget(url: string): { path: string; query: string } | undefined {
  let start = 0;
  if (url.charCodeAt(0) !== 0x2f) {
    const absolute = /^https?:\/\/[^/?#]*/i.exec(url);
    if (absolute === null) return undefined;
    start = absolute[0].length;
  }
  const hash = url.indexOf('#', start);
  const end = hash === -1 ? url.length : hash;
  const found = url.indexOf('?', start);
  const question = found !== -1 && found < end ? found : -1;
  const pathEnd = question === -1 ? end : question;
  let path = url.slice(start, pathEnd);
  if (start !== 0 && path.charCodeAt(0) !== 0x2f) path = '/' + path;
  const query = question === -1 ? '' : url.slice(question + 1, end);
  // A path without an escape, as most are, is kept as it is: the replace would still run the expression over it.
  if (path.includes('%'))
    path = path.replace(UNRESERVED_ESCAPE, (escape) => String.fromCharCode(parseInt(escape.slice(1), 16)));
  return { path, query };
}
