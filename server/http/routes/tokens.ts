import { MAX_TOKEN_LIFETIME, TOKEN_NAME, TOKENS_PATH } from '../../../shared/endpoints.js';
import { problems } from '../../../shared/problems.js';
import { HttpError } from '../../errors.js';
import { mintApiToken } from '../../security/api-token.js';
import type { Accounts } from '../../security/credentials.js';
import { lesserRole, ownershipOf, tokenOwner } from '../../security/token-owner.js';
import type { ApiTokenRecord } from '../../store/store.js';
import { isJsonType } from '../media-type.js';
import { ADMIN_ONLY, empty, json, schema } from '../openapi.js';
import { parseJson, readBody } from '../request.js';
import { notFound, sendEmpty, sendJson } from '../response.js';
import type { Context, Route, RouteDeps } from '../route.js';

/** A token request's body is a few fields: this is plenty. */
const MAX_TOKEN_REQUEST = 4096;
const TOKEN_ID = /^[0-9a-f]{16}$/;
const NO_STORE = { 'Cache-Control': 'no-store' };

/**
 * POST, GET /tokens and DELETE /tokens/{id}: API tokens for scripts and
 * scrapers (docs/api.md "API tokens"). An admin's session or token is
 * needed in every --require-session mode. The token itself is in the
 * answer to its creation and nowhere else.
 */
export function tokenRoutes(deps: RouteDeps): Route[] {
  const { store, access } = deps;
  return [
    {
      method: 'POST',
      path: TOKENS_PATH,
      doc: CREATE_DOC,
      handler: async ({ req, res, now }: Context) => {
        const creator = await access.requireAdmin(req, res, now);
        if (!isJsonType(req.headers['content-type']))
          throw new HttpError(
            problems.unsupportedMediaType,
            'Send the token request as Content-Type: application/json.',
          );
        const request = checkTokenRequest(parseJson(await readBody(req, MAX_TOKEN_REQUEST)));
        const minted = mintApiToken();
        const record: ApiTokenRecord = {
          id: minted.id,
          name: request.name,
          role: request.role,
          hash: minted.hash,
          ...ownershipOf(creator.account),
          parent: creator.token?.id,
          createdAt: now,
          expiresAt: expiryWithin(creator.token, request.expiresIn, now),
        };
        if ((await store.createToken(record)) === 'name-taken') {
          throw new HttpError(
            problems.tokenNameTaken,
            `An API token named "${record.name}" exists: revoke it first (DELETE ${TOKENS_PATH}/ID), or choose another name.`,
          );
        }
        sendJson(res, 201, JSON.stringify({ ...describe(record, now, deps.accounts), token: minted.token }), {
          Location: `${TOKENS_PATH}/${record.id}`,
          ...NO_STORE,
        });
      },
    },
    {
      method: 'GET',
      path: TOKENS_PATH,
      doc: LIST_DOC,
      handler: async ({ req, res, now }: Context) => {
        await access.requireAdmin(req, res, now);
        const tokens = await store.listTokens();
        sendJson(res, 200, JSON.stringify({ items: tokens.map((t) => describe(t, now, deps.accounts)) }), NO_STORE);
      },
    },
    {
      method: 'DELETE',
      path: `${TOKENS_PATH}/:id`,
      doc: REVOKE_DOC,
      handler: async ({ req, res, now, params }: Context) => {
        await access.requireAdmin(req, res, now);
        const id = params.id!;
        if (!TOKEN_ID.test(id) || !(await store.revokeToken(id)))
          throw notFound(`There is no API token with the id ${JSON.stringify(id)}: GET ${TOKENS_PATH} lists them.`);
        sendEmpty(res, 204);
      },
    },
  ];
}

interface TokenRequest {
  name: string;
  role: 'admin' | 'reader';
  /** Seconds; undefined: it never expires. */
  expiresIn: number | undefined;
}

function checkTokenRequest(body: unknown): TokenRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw invalid('', 'The body must be a JSON object: {"name": ..., "role": ..., "expiresIn": ...}.');
  const { name, role = 'reader', expiresIn, ...rest } = body as Record<string, unknown>;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined)
    throw invalid(
      `/${unknown}`,
      `Unknown member ${JSON.stringify(unknown)}: a token request has name, role and expiresIn.`,
    );
  if (typeof name !== 'string' || !TOKEN_NAME.test(name))
    throw invalid('/name', 'name must be 1 to 64 of A-Z a-z 0-9 . _ -');
  if (role !== 'admin' && role !== 'reader') throw invalid('/role', 'role must be "admin" or "reader".');
  if (
    expiresIn !== undefined &&
    (!Number.isSafeInteger(expiresIn) || (expiresIn as number) < 1 || (expiresIn as number) > MAX_TOKEN_LIFETIME)
  ) {
    throw invalid(
      '/expiresIn',
      `expiresIn must be whole seconds from 1 to ${MAX_TOKEN_LIFETIME} (ten years), or absent for a token that does not expire.`,
    );
  }
  return { name, role, expiresIn: expiresIn as number | undefined };
}

/**
 * When a new token expires. One made with a token cannot outlive it (it
 * has no more rights than its creator): without expiresIn it expires with
 * its creator, and a later expiry is refused.
 */
function expiryWithin(
  creator: ApiTokenRecord | undefined,
  expiresIn: number | undefined,
  now: number,
): number | undefined {
  const asked = expiresIn === undefined ? undefined : now + expiresIn * 1000;
  const limit = creator?.expiresAt;
  if (limit === undefined) return asked;
  if (asked === undefined) return limit;
  if (asked > limit) {
    const most = Math.floor((limit - now) / 1000);
    throw invalid(
      '/expiresIn',
      `The API token "${creator!.name}" that makes this one expires at ${new Date(limit).toISOString()}, and a token it makes cannot outlive it: expiresIn at most ${most} (usersctl tokens create --expires ${most}s), or leave it out.`,
    );
  }
  return asked;
}

function invalid(field: string, detail: string): HttpError {
  return new HttpError(problems.invalidTokenRequest, detail, {}, { field });
}

/** A token as the API shows it: everything but its hash, and what it may do now. */
function describe(t: ApiTokenRecord, now: number, accounts: Accounts): Record<string, unknown> {
  const owner = tokenOwner(t, accounts);
  return {
    id: t.id,
    name: t.name,
    role: t.role,
    actsAs: owner === undefined ? null : lesserRole(t.role, owner.role),
    createdBy: t.createdBy,
    createdWith: t.parent ?? null,
    createdAt: new Date(t.createdAt).toISOString(),
    expiresAt: t.expiresAt === undefined ? null : new Date(t.expiresAt).toISOString(),
    expired: t.expiresAt !== undefined && t.expiresAt <= now,
  };
}

const NEEDS_ADMIN =
  "Needs an admin's session or API token, in every `--require-session` mode (401 without one, 403 for a `reader`).";

const CREATE_DOC = {
  operationId: 'createToken',
  summary: 'Create an API token; the token is in this answer only',
  description: `The token goes in \`Authorization: Bearer ...\` on any request a session could make. It is stored as its SHA-256: it cannot be shown again. ${NEEDS_ADMIN}`,
  tags: ['tokens'],
  security: ADMIN_ONLY,
  requestBody: { required: true, content: { 'application/json': { schema: schema('TokenRequest') } } },
  responses: {
    '201': json('Created; `Location` names it, `token` is the secret to keep.', schema('NewToken'), 'Location'),
  },
  problems: [401, 403, 409, 413, 415, 422],
};

const LIST_DOC = {
  operationId: 'listTokens',
  summary: 'List the API tokens (never the tokens themselves)',
  description: `Oldest first, expired ones included until revoked. ${NEEDS_ADMIN}`,
  tags: ['tokens'],
  security: ADMIN_ONLY,
  responses: {
    '200': json('The tokens.', {
      type: 'object',
      required: ['items'],
      properties: { items: { type: 'array', items: schema('Token') } },
    }),
  },
  problems: [401, 403],
};

const REVOKE_DOC = {
  operationId: 'revokeToken',
  summary: 'Revoke an API token: at once, on every instance',
  description: NEEDS_ADMIN,
  tags: ['tokens'],
  security: ADMIN_ONLY,
  parameters: [
    {
      name: 'id',
      in: 'path',
      required: true,
      description: "The token's id, 16 hex digits.",
      schema: { type: 'string', pattern: '^[0-9a-f]{16}$' },
    },
  ],
  responses: { '204': empty('Revoked.') },
  problems: [401, 403, 404],
};
