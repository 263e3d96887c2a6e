import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { limitKey } from '../security/rate-limit.js';

/**
 * What one client address may hold of the server's connections. Ordinary
 * heavy clients (a load test, an application's pool, a proxy) open
 * hundreds, and are served: nothing is refused until the server as a
 * whole nears what it can hold (`total`). Then the newest connection of
 * the address holding the most is closed, so an address opening
 * thousands only ever loses its own, and every other address still gets
 * in. `perClient` (off by default) caps each address outright.
 * Addresses are counted as for the rate limit: an IPv6 /64 is one.
 */
interface ConnectionLimits {
  /** Open connections at most, all addresses together. */
  readonly total: number;
  /** Open connections per address at most; 0: no cap but `total`'s. */
  readonly perClient: number;
}

/** Open files kept for what is not a client connection: the journal, the database's pool, the log. */
const FILES_KEPT = 256;
/** The default total: each idle connection costs tens of kilobytes; this many stays far from memory's limits. */
const MAX_DEFAULT_TOTAL = 10_000;
const MIN_TOTAL = 64;

/** `--max-connections 0`: what the process's open-files limit leaves, up to MAX_DEFAULT_TOTAL. */
export function defaultTotalConnections(): number {
  return Math.max(MIN_TOTAL, Math.min(MAX_DEFAULT_TOTAL, openFilesLimit() - FILES_KEPT));
}

/** The soft limit on open files (Linux's /proc/self/limits); 1024 where it cannot be read. */
function openFilesLimit(): number {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
    return soft === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(soft) || 1024;
  } catch {
    return 1024;
  }
}

/** The server's 'connection' listener that keeps `limits`. */
export function connectionLimits(limits: ConnectionLimits): (socket: Socket) => void {
  const byAddress = new Map<string, Set<Socket>>();
  let total = 0;
  /** The address holding the most, as far as known; recomputed when it may have lost the lead. */
  let top: Set<Socket> | undefined;
  let topStale = false;
  const heaviest = (): Set<Socket> | undefined => {
    if (topStale) {
      top = undefined;
      for (const held of byAddress.values()) if (top === undefined || held.size > top.size) top = held;
      topStale = false;
    }
    return top;
  };
  return (socket) => {
    const key = limitKey(socket.remoteAddress ?? '');
    const held = byAddress.get(key) ?? new Set<Socket>();
    if (limits.perClient > 0 && held.size >= limits.perClient) {
      socket.destroy();
      return;
    }
    if (held.size === 0) byAddress.set(key, held);
    held.add(socket);
    total++;
    if (top === undefined || held.size > top.size) top = held;
    socket.once('close', () => {
      held.delete(socket);
      total--;
      if (held.size === 0) byAddress.delete(key);
      if (held === top) topStale = true;
    });
    if (total <= limits.total) return;
    const shed = heaviest()!;
    // Most often the heaviest is the arriving connection's own address: then it is the newest.
    if (shed === held) socket.destroy();
    else shedNewest(shed);
  };
}

/** Closes the newest connection of `held` (a Set keeps the order of arrival). */
function shedNewest(held: Set<Socket>): void {
  let newest: Socket | undefined;
  for (const socket of held) newest = socket;
  newest?.destroy();
}
