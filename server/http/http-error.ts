import { problems, type ProblemKind } from '../../shared/problems.js';

/**
 * An error the API answers on purpose. Handlers throw these; the app turns
 * them into `application/problem+json`. Anything else thrown is a bug and
 * becomes a bare 500.
 */
export class HttpError extends Error {
  override readonly name = 'HttpError';
  constructor(
    readonly kind: ProblemKind,
    readonly detail: string,
    /** Extra response headers, such as `Allow` or `Retry-After`. */
    readonly headers: Record<string, string> = {},
    /** Extension members of the problem document, such as `field`. */
    readonly extensions: Record<string, unknown> = {},
  ) {
    super(detail);
  }

  get status(): number {
    return this.kind.status;
  }
}

export function notFound(detail = 'There is nothing at this path.'): HttpError {
  return new HttpError(problems.notFound, detail);
}
