/**
 * `GET /indexes` (API.md "Declared fields"): the fields declared on this
 * store, as the store applies them now, with the access of `GET /users`.
 */
import { INDEXES_PATH } from '../../../shared/endpoints.js';
import { json, NEEDS_SESSION_TO_READ, schema, SESSION_OPTIONAL } from '../openapi.js';
import { sendJson } from '../response.js';
import type { Route, RouteDeps } from '../route.js';

export function indexesRoute(deps: RouteDeps): Route {
  return {
    method: 'GET',
    path: INDEXES_PATH,
    handler: async (ctx) => {
      await deps.access.authorize(ctx, 'read');
      const items = deps.store.declaredFields().map((f) => ({
        path: f.path,
        unique: f.unique,
        caseInsensitive: f.caseInsensitive,
      }));
      sendJson(ctx.res, 200, JSON.stringify({ items }));
    },
    doc: INDEXES_DOC,
  };
}

const INDEXES_DOC = {
  operationId: 'listIndexes',
  summary: 'The declared fields: indexed, unique, case-insensitive',
  description: `The fields \`users-server index add\` declared (docs/operations.md "Declared fields"), in path order: a filter's \`eq\`, \`sw\` and orderings on one, and a sort that starts with one, are answered from its index; a unique one refuses a write that gives another user its value (409 \`unique-violation\`). ${NEEDS_SESSION_TO_READ}`,
  tags: ['users'],
  security: SESSION_OPTIONAL,
  responses: { '200': json('The declared fields.', schema('FieldDeclarations')) },
  problems: [401],
};
