/**
 * The declared paths (`GET /indexes`, the fields the operator declared:
 * indexed, unique or case-insensitive): a column each in the table, and where plain
 * words are looked for. A server without the endpoint (404) declares none.
 */
import { call } from './api.js';

/** The paths of a declaration list, in whichever of the shapes a list of them takes (`items`, `fields`, or bare). */
function pathsOf(body: unknown): string[] {
  const list = Array.isArray(body)
    ? body
    : typeof body === 'object' && body !== null
      ? (Object.values(body).find(Array.isArray) ?? [])
      : [];
  const paths: string[] = [];
  for (const entry of list as unknown[]) {
    const path = typeof entry === 'string' ? entry : (entry as { path?: unknown } | null)?.path;
    if (typeof path === 'string' && !paths.includes(path)) paths.push(path);
  }
  return paths;
}

export async function declaredPaths(): Promise<readonly string[]> {
  try {
    return pathsOf((await call('GET', 'indexes')).body);
  } catch {
    return [];
  }
}
