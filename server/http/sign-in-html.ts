import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { LOGIN_PATH, LOGOUT_PATH } from '../../shared/endpoints.js';
import { FORM_TOKEN_FIELD } from '../security/form-token.js';

/**
 * The HTML of the browser sign-in page (`--login-page`): one small
 * self-contained document, inline CSS only, no script, no external asset,
 * so a Content-Security-Policy of `default-src 'none'` can hold with one
 * hash for the style sheet.
 */
type LoginView =
  | { kind: 'sign-in'; token: string; username?: string; error?: string }
  | { kind: 'signed-in'; token: string; account: string; error?: string };

const STYLE = `
:root{color-scheme:light dark;font-family:system-ui,sans-serif;line-height:1.5}
body{margin:0;display:grid;place-items:center;min-height:100vh;background:Canvas;color:CanvasText}
main{width:min(22rem,calc(100% - 2rem));padding:1.5rem;border:1px solid GrayText;border-radius:.5rem}
h1{margin:0 0 1rem;font-size:1.5rem}
form{display:grid;gap:.5rem}
label{font-weight:600}
input{font:inherit;padding:.5rem;border:1px solid GrayText;border-radius:.25rem}
button{font:inherit;margin-top:.5rem;padding:.5rem;border-radius:.25rem;cursor:pointer}
:focus-visible{outline:3px solid Highlight;outline-offset:2px}
.error{margin:0 0 1rem;padding:.5rem;border-left:4px solid #b00020;background:#fde7ea;color:#5f0010}
`.trim();

/** The Content-Security-Policy of the page: nothing but its own inline style sheet, forms to itself, no framing. */
const LOGIN_PAGE_CSP = [
  "default-src 'none'",
  `style-src 'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`,
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

/** Headers of every answer that is the page. */
const PAGE_HEADERS: Record<string, string> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Cache-Control': 'no-store',
  Vary: 'Cookie',
  'Content-Security-Policy': LOGIN_PAGE_CSP,
  // For browsers that do not know frame-ancestors.
  'X-Frame-Options': 'DENY',
  // Not no-referrer: under it a browser sends `Origin: null` with the form's
  // POST (Fetch, "serialize a request origin"), which the Origin check must
  // refuse. same-origin still gives other origins no Referer at all.
  'Referrer-Policy': 'same-origin',
  'X-Content-Type-Options': 'nosniff',
};

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text made safe for HTML content and quoted attribute values. */
function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

function errorRegion(error: string | undefined): string {
  return error === undefined ? '' : `<p class="error" id="error" role="alert">${escapeHtml(error)}</p>\n`;
}

function tokenField(token: string): string {
  return `<input type="hidden" name="${FORM_TOKEN_FIELD}" value="${escapeHtml(token)}">`;
}

function signInBody(view: Extract<LoginView, { kind: 'sign-in' }>): string {
  // The error names no field, so both inputs point at it.
  const described = view.error === undefined ? '' : ' aria-describedby="error" aria-invalid="true"';
  return `<h1>Sign in</h1>
${errorRegion(view.error)}<form method="post" action="${LOGIN_PATH}">
${tokenField(view.token)}
<label for="username">User name</label>
<input id="username" name="username" type="text" autocomplete="username" autocapitalize="none" spellcheck="false" required value="${escapeHtml(view.username ?? '')}"${described}>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required${described}>
<button type="submit">Sign in</button>
</form>`;
}

function signedInBody(view: Extract<LoginView, { kind: 'signed-in' }>): string {
  return `<h1>Signed in</h1>
${errorRegion(view.error)}<p>Signed in as <strong>${escapeHtml(view.account)}</strong>.</p>
<form method="post" action="${LOGOUT_PATH}">
${tokenField(view.token)}
<button type="submit">Sign out</button>
</form>`;
}

/** The whole document for a view. */
function renderLoginPage(view: LoginView): string {
  const title = view.kind === 'sign-in' ? 'Sign in' : 'Signed in';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · users-server</title>
<style>${STYLE}</style>
</head>
<body>
<main>
${view.kind === 'sign-in' ? signInBody(view) : signedInBody(view)}
</main>
</body>
</html>
`;
}

/** Answers with the page for `view`; HEAD gets the headers only. */
export function sendLoginPage(
  res: ServerResponse,
  status: number,
  view: LoginView,
  headers: Record<string, string> = {},
): void {
  const html = renderLoginPage(view);
  res.statusCode = status;
  for (const name in PAGE_HEADERS) res.setHeader(name, PAGE_HEADERS[name]!);
  for (const name in headers) res.setHeader(name, headers[name]!);
  res.setHeader('Content-Length', String(Buffer.byteLength(html)));
  res.end(html);
}
