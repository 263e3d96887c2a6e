import type { IncomingMessage } from 'node:http';

/**
 * The address a request is attributed to for limits: the peer of the socket.
 * One place, so that trusting a proxy's forwarded address can be added here.
 */
export function clientAddress(req: IncomingMessage): string {
  return req.socket.remoteAddress ?? '';
}
