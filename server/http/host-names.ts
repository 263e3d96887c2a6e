import { networkInterfaces } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Config } from '../ops/config.js';

/** A machine's interface addresses as Host names them: IPv4 dotted, IPv6 bracketed. */
type AddressSource = () => string[];

/** What a Host value is to this server: one of its names, not a host at all (400), or another server's (421). */
export type HostVerdict = 'allowed' | 'malformed' | 'misdirected';

/**
 * The names a request may give for this server, in `Host` and in an
 * absolute-form target: the address it listens on (`--host`, as given),
 * loopback names, and `--allowed-hosts`. A page of another site whose name
 * is pointed at this server's address (DNS rebinding) sends its own name,
 * none of these, and is answered 421 (RFC 9110 sections 7.4 and 15.5.20).
 * Only the name is compared: any port is accepted, as a proxy or a port
 * forward changes it.
 */
export class HostNames {
  private readonly any: boolean;
  private readonly named: ReadonlySet<string>;
  /** Listening on 0.0.0.0 or ::: the machine's interface addresses count as listening addresses. */
  private readonly wildcard: boolean;
  private interfaces: ReadonlySet<string> = new Set();
  /** `now()` at the last read of the interfaces; -Infinity before the first. */
  private interfacesReadAt = -Infinity;
  /**
   * Host values found allowed, cleared when full. Reason: clients send the
   * same few again and again, and judging one anew (`nameOf`) costs a GET
   * about 3,900 instructions (6%).
   */
  private readonly allowed = new Set<string>();
  /** The value `judge` last found allowed; "" at first, which names no host and is allowed. */
  private lastAllowed = '';

  constructor(
    config: Pick<Config, 'host' | 'allowedHosts'>,
    private readonly addresses: AddressSource = machineAddresses,
    /** Milliseconds of a monotonic clock; tests move their own. */
    private readonly now: () => number = () => performance.now(),
  ) {
    this.any = config.allowedHosts.includes('*');
    const listening = nameOf(
      config.host.includes(':') && !config.host.startsWith('[') ? `[${config.host}]` : config.host,
    );
    this.wildcard = listening === '0.0.0.0' || listening === '[::]';
    this.named = new Set([...config.allowedHosts.map(nameOf), listening].filter((name) => name !== undefined));
  }

  /** Judges a Host field value, or an absolute-form target's authority without its userinfo. */
  judge(host: string): HostVerdict {
    if (this.isLastAllowed(host)) return 'allowed';
    // A kept value passed the syntax check when it was kept.
    if (!this.allowed.has(host)) {
      if (!HOST.test(host)) return 'malformed';
      if (!this.allows(host)) return 'misdirected';
    }
    this.lastAllowed = host;
    return 'allowed';
  }

  /**
   * Reason: a client sends one Host value on every request, and judging it
   * (its regular expression, its hash) costs a GET 1,070 instructions (1.6%).
   */
  private isLastAllowed(host: string): boolean {
    return host === this.lastAllowed;
  }

  /** True when `host`, a Host value of good syntax, names this server; "" (no name) does too. */
  private allows(host: string): boolean {
    if (this.any || host === '') return true;
    const name = nameOf(host);
    if (name === undefined || !this.isOwn(name)) return false;
    if (this.allowed.size >= ALLOWED_KEPT) this.allowed.clear();
    this.allowed.add(host);
    return true;
  }

  private isOwn(name: string): boolean {
    if (isLoopbackName(name) || this.named.has(name)) return true;
    if (!this.wildcard) return false;
    // An address added since the last read (DHCP, a new interface) is
    // found by reading again, at most once a second.
    const now = this.now();
    if (!this.interfaces.has(name) && now - this.interfacesReadAt >= INTERFACES_REREAD_MS) {
      this.interfaces = new Set(this.addresses());
      this.interfacesReadAt = now;
    }
    return this.interfaces.has(name);
  }
}

// RFC 9110 section 7.2: Host = uri-host [ ":" port ]; RFC 3986 section 3.2.2:
// uri-host = IP-literal / IPv4address / reg-name (unreserved, pct-encoded, sub-delims).
const HOST = /^(?:\[[0-9A-Za-z:._~!$&'()*+,;=-]+\]|[0-9A-Za-z._~!$&'()*+,;=%-]*)(?::[0-9]*)?$/;

const ALLOWED_KEPT = 64;
const INTERFACES_REREAD_MS = 1000;

/**
 * The name of a Host value as compared: lower case, without the port (not
 * read, so not checked either) or a final dot, an IP address in the form a
 * browser writes it (`[0:0::1]` is `[::1]`, `127.1` is `127.0.0.1`);
 * undefined for no host.
 */
export function nameOf(host: string): string | undefined {
  const colon = host.indexOf(':', host.startsWith('[') ? host.indexOf(']') : 0);
  let name: string;
  try {
    name = new URL(`http://${colon < 0 ? host : host.slice(0, colon)}`).hostname;
  } catch {
    return undefined;
  }
  return name.endsWith('.') ? name.slice(0, -1) : name;
}

/** RFC 6761 section 6.3: localhost and every name under it are loopback; and the loopback addresses. */
function isLoopbackName(name: string): boolean {
  return name === 'localhost' || name.endsWith('.localhost') || name === '127.0.0.1' || name === '[::1]';
}

function machineAddresses(): string[] {
  const addresses: string[] = [];
  for (const list of Object.values(networkInterfaces())) {
    for (const info of list ?? [])
      addresses.push(nameOf(info.family === 'IPv6' ? `[${info.address}]` : info.address) ?? '');
  }
  return addresses;
}
