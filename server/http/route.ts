/**
 * What a route is: a method, a path pattern, a handler and the OpenAPI
 * description of what it answers, side by side, so the document served at
 * /openapi.json is built from the same table the router matches and the
 * two cannot drift.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Config } from '../ops/config.js';
import type { Accounts } from '../security/credentials.js';
import type { LoginLimits } from '../security/login-limit.js';
import type { Store } from '../store/store.js';
import type { AccessControl } from './access-control.js';
import type { SessionCookies } from './session-cookies.js';

export interface Context {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** Path parameters by name, still percent-encoded. */
  readonly params: Record<string, string>;
  /** The query string without its leading "?", or "". */
  readonly query: string;
  /** Milliseconds since the epoch, read from the clock when first asked, then the same for the whole request. */
  readonly now: number;
  /**
   * Answers a refusal found after the handler returned, as a thrown one
   * would be: for a handler that runs on callbacks and returns no promise.
   */
  fail(error: unknown): void;
}

/** Answers a request; a refusal is thrown (HttpError), sync or as a rejected promise. */
export type Handler = (ctx: Context) => void | Promise<void>;

export interface Route {
  readonly method: string;
  /** Segments; a segment starting with ":" is a parameter, which matches one non-empty segment. */
  readonly path: string;
  readonly handler: Handler;
  /** Its OpenAPI operation (openapi.ts). */
  readonly doc: OperationDoc;
}

type Json = Record<string, unknown>;

/** The OpenAPI description of one route; openapi.ts adds the common parts. */
export interface OperationDoc {
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  readonly tags: readonly string[];
  /** Security requirements; [] for none. */
  readonly security: readonly Json[];
  readonly parameters?: readonly Json[];
  readonly requestBody?: Json;
  /** The responses that are not problem documents. */
  readonly responses: Record<string, Json>;
  /** Problem statuses besides the ones any request can meet. */
  readonly problems: readonly number[];
}

/** What the routes are built from. */
export interface RouteDeps {
  readonly store: Store;
  readonly config: Config;
  readonly sessions: SessionCookies;
  /** Who may do what: sessions and API tokens against --require-session and roles. */
  readonly access: AccessControl;
  readonly accounts: Accounts;
  /** Looked at before each login, so an account just added can log in at once. */
  readonly accountsFile?: { refresh(): void | Promise<void> };
  /** The failed-login limit; one instance's own when absent. */
  readonly loginLimits?: LoginLimits;
  /** Session signing keys: the first signs, all verify. */
  readonly keys: readonly Buffer[];
  /** Where operational lines go (every login, for one): stderr unless a test catches them. */
  readonly log: (line: string) => void;
  /**
   * Milliseconds since the epoch, as `Context.now` reads them, for checks after a request began; tests inject their
   * own.
   */
  readonly clock?: () => number;
}
