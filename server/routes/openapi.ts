import { createHash } from 'node:crypto';
import { etagMatches } from '../http/response.js';
import type { Route } from '../http/router.js';

export const OPENAPI_PATH = '/openapi.json';

/**
 * GET /openapi.json: the document, serialized once. It changes only with the
 * server's code, so it carries a strong ETag and clients revalidate
 * (`no-cache`) instead of refetching.
 */
export function openApiRoute(document: () => Record<string, unknown>): Route {
  let body: string | undefined;
  let etag = '';
  return {
    method: 'GET',
    path: OPENAPI_PATH,
    handler: ({ req, res }) => {
      if (body === undefined) {
        body = JSON.stringify(document());
        etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
      }
      res.setHeader('ETag', etag);
      res.setHeader('Cache-Control', 'no-cache');
      const ifNoneMatch = req.headers['if-none-match'];
      if (ifNoneMatch !== undefined && etagMatches(ifNoneMatch, etag, true)) {
        res.statusCode = 304;
        res.end();
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
      res.end(body);
    },
  };
}
