import { BUILT_IN_ACCOUNT } from './accounts-file.js';
import type { Account, Accounts, Role } from './credentials.js';

/**
 * An API token belongs to an account: it acts with the lesser of its own
 * role and its account's role now, and stops working when the account is
 * removed, the way the account's sessions end.
 */
interface TokenOwnership {
  /** The owning account's name. */
  readonly createdBy: string;
  /** The owning account's `created` when the token was made; undefined: the name alone is checked. */
  readonly ownerSince?: string | undefined;
}

/** What the owner of a new token is: its name, and when it was added ('' for the built-in admin). */
export function ownershipOf(account: Account): Required<TokenOwnership> {
  return { createdBy: account.name, ownerSince: account.created ?? '' };
}

/**
 * The account a token acts for, while it exists; undefined once it was
 * removed, also when another account of the same name was added since.
 * The built-in admin is never removed: its tokens follow the name.
 */
export function tokenOwner(token: TokenOwnership, accounts: Accounts): Account | undefined {
  const account = accounts.get(token.createdBy);
  if (account === undefined || account.name === BUILT_IN_ACCOUNT || token.ownerSince === undefined) return account;
  return (account.created ?? '') === token.ownerSince ? account : undefined;
}

/** The role a token acts with: the lesser of its own and its owner's. */
export function lesserRole(a: Role, b: Role): Role {
  return a === 'admin' && b === 'admin' ? 'admin' : 'reader';
}
