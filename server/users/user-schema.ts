/**
 * The schema of the users' fields (docs/operations.md "A schema for the
 * users' fields"): a JSON Schema for the whole user that an operator sets
 * with `users-server schema set`, checked on top of the rules every user
 * follows (shared/user.ts) by every write that gives a user a
 * representation: a PUT, a `POST /users/new` (each line of an import) and
 * a PATCH (on the merged user); a DELETE is not checked. As pure
 * decisions: what a write that breaks it is refused with, and whether the
 * users a store holds fit it.
 */
import { compileSchema, type CompiledSchema, type SchemaViolation } from './json-schema/compile-schema.js';

export type { SchemaViolation } from './json-schema/compile-schema.js';

/** A schema as a store keeps it: the document, and how it was set. */
export interface SchemaSetting {
  /** The JSON Schema, as the operator wrote it. */
  readonly document: unknown;
  /** False when it was set with `--check-existing no`: users written before may break it. */
  readonly checkedExisting: boolean;
}

/** A write refused because the user breaks the schema: 422 `invalid-user`, every violation listed. */
export interface SchemaRefusal {
  readonly kind: 'schema-violation';
  readonly detail: string;
  /** The first violation's path and keyword. */
  readonly field: string;
  readonly keyword: string;
  readonly errors: readonly SchemaViolation[];
}

/** How many users a refused `schema set` names. */
const NAMED_USERS = 10;

/** A setting, compiled once into its checks. */
export class UserSchema {
  private readonly compiled: CompiledSchema;
  /** Whether the schema can say anything of a user's `id` (compiled.readsMember), asked once. */
  private readonly readsId: boolean;

  /** Throws SchemaRefusedError (json-schema/compile-schema.ts) for a schema the validator does not apply. */
  constructor(readonly setting: SchemaSetting) {
    this.compiled = compileSchema(setting.document);
    this.readsId = this.compiled.readsMember('id');
  }

  /** Every way `user` (the whole user, its id included) breaks the schema. */
  violations(user: unknown): SchemaViolation[] {
    return this.compiled.validate(user);
  }

  /**
   * The refusal of writing `body` as the user `id` (what its
   * representation holds: the body, with the id where it lacks one);
   * undefined when it fits. A body without the id is checked as it is
   * when the schema never looks at the id, so that a write copies no
   * object to check it; only a schema that reads the id costs a copy of
   * the body with the id added.
   */
  refusalAs(body: Readonly<Record<string, unknown>>, id: number): SchemaRefusal | undefined {
    const asIs = body.id === id || (body.id === undefined && !this.readsId);
    return this.refusal(asIs ? body : { ...body, id });
  }

  /** The refusal of writing `user`; undefined when it fits, found by the one pass that allocates nothing. */
  refusal(user: unknown): SchemaRefusal | undefined {
    if (this.compiled.test(user)) return undefined;
    const errors = this.compiled.validate(user);
    const first = errors[0]!;
    const detail =
      errors.length === 1
        ? `The user breaks the schema: ${first.detail}.`
        : `The user breaks the schema in ${errors.length} places: ${errors.map((e) => e.detail).join('; ')}.`;
    return { kind: 'schema-violation', detail, field: first.field, keyword: first.keyword, errors };
  }

  /**
   * The refusal of setting this schema over `users` (in id order): how
   * many break it and the first NAMED_USERS of them, with their paths;
   * undefined when they all fit, or when it is set with
   * `--check-existing no`.
   */
  refusalOver(users: Iterable<{ readonly id: number; readonly json: string }>): string | undefined {
    if (!this.setting.checkedExisting) return undefined;
    let count = 0;
    const named: string[] = [];
    for (const user of users) {
      const errors = this.violations(JSON.parse(user.json));
      if (errors.length === 0) continue;
      count++;
      if (named.length < NAMED_USERS) named.push(`${user.id} (${pathsOf(errors)})`);
    }
    if (count === 0) return undefined;
    const which =
      count === 1
        ? `1 user breaks the schema: user ${named[0]}`
        : `${count} users break the schema${count > NAMED_USERS ? `, the first ${NAMED_USERS}` : ''}: users ${named.join(', ')}`;
    return `${which}; change them first, or set it with --check-existing no to check only what is written from now on`;
  }
}

/** The distinct paths of `errors`, sorted, '' named as the user itself. */
function pathsOf(errors: readonly SchemaViolation[]): string {
  return [...new Set(errors.map((e) => (e.field === '' ? 'the user itself' : e.field)))].sort().join(', ');
}
