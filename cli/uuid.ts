import { hash } from 'node:crypto';

/** RFC 9562 section 6.6: the namespace for names that are URLs. */
export const NAMESPACE_URL = '6ba7b811-9dad-11d1-80b4-00c04fd430c8';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(text: string): boolean {
  return UUID.test(text);
}

/** The 16 bytes of a UUID in its hyphenated text form. */
function uuidBytes(uuid: string): Buffer {
  if (!isUuid(uuid)) throw new TypeError(`not a UUID: ${uuid}`);
  return Buffer.from(uuid.replaceAll('-', ''), 'hex');
}

/** Prepared once per namespace: `import` derives one UUID per input line. */
export function uuidV5Generator(namespace: string): (name: string | Uint8Array) => string {
  const ns = uuidBytes(namespace);
  return (name) => {
    // RFC 9562 section 5.5: SHA-1 over namespace bytes then name bytes; the
    // first 16 bytes of the digest, with version 5 and the RFC variant set.
    // crypto.hash: one call instead of a Hash object per name (import derives 100,000).
    const digest = hash(
      'sha1',
      Buffer.concat([ns, typeof name === 'string' ? Buffer.from(name, 'utf8') : name]),
      'buffer',
    );
    digest[6] = (digest[6]! & 0x0f) | 0x50;
    digest[8] = (digest[8]! & 0x3f) | 0x80;
    const hex = digest.toString('hex', 0, 16);
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
  };
}

/** A name-based UUID (version 5, SHA-1) of `name` under `namespace`. */
export function uuidV5(namespace: string, name: string | Uint8Array): string {
  return uuidV5Generator(namespace)(name);
}
