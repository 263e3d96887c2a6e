/**
 * Entity tags (RFC 9110 section 8.8.3): the one place they are computed and
 * compared. A tag is a hash of the representation's bytes, so every store
 * (and every instance on a shared database) gives the same user the same tag.
 */
import { hash } from 'node:crypto';

/** The strong entity tag of `text`: 27 base64url characters of its SHA-256, quoted. */
export function entityTag(text: string): string {
  // The one-shot hash: a third of createHash's time (no Hash object per call), the same digest.
  return `"${hash('sha256', text, 'base64url').slice(0, 27)}"`;
}

// RFC 9110 section 8.8.3: entity-tag = [ weak ] opaque-tag; weak = %s"W/"
const ENTITY_TAG = /(W\/)?"[\x21\x23-\x7e\x80-\xff]*"/g;

/**
 * Evaluates an If-Match / If-None-Match field value against the current tag.
 * `weak` selects weak comparison (If-None-Match, RFC 9110 section 13.1.2),
 * otherwise strong comparison (If-Match, section 13.1.1). No current tag
 * (no representation) matches nothing, not even `*`.
 */
export function etagMatches(field: string, etag: string | undefined, weak: boolean): boolean {
  if (etag === undefined) return false;
  if (field.trim() === '*') return true;
  return tagsOf(field, weak).includes(etag);
}

/** The strong tags an If-Match field lists (weak ones never match it); `*` is the caller's to handle. */
export function strongTags(field: string): string[] {
  return tagsOf(field, false);
}

/** The tags of a field, weak ones stripped of `W/` when `weak` comparison takes them, left out otherwise. */
function tagsOf(field: string, weak: boolean): string[] {
  const tags: string[] = [];
  for (const match of field.matchAll(ENTITY_TAG)) {
    const isWeak = match[1] !== undefined;
    if (!isWeak) tags.push(match[0]);
    else if (weak) tags.push(match[0].slice(2));
  }
  return tags;
}
