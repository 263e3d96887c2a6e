/**
 * Whether the reader of a pipe has gone, asked without writing to it: a
 * command that waits long between writes (`watch | head -n 3`) learns that
 * its reader has exited at once, not at its next line. poll(2) says it:
 * the write end of a pipe without a reader reports POLLERR (Linux fs/pipe.c,
 * pipe_poll), which is what GNU tail -f asks. A write of zero bytes does not
 * tell (the kernel answers it before looking for readers), nor does fstat;
 * node's one way to poll a descriptor is WASI's poll_oneoff (uvwasi, on
 * libuv's uv_poll), called here from JavaScript over a module that only
 * lends it memory.
 */
import { fstatSync } from 'node:fs';
import type { WASI } from 'node:wasi';

/** What this file uses of the WebAssembly global, which node's types leave to the DOM's. */
interface WebAssemblyApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: { memory: { buffer: ArrayBuffer } } };
}

/** The WebAssembly module `(module (memory (export "memory") 1))`: one page for poll_oneoff's arguments. */
const MEMORY_MODULE = Buffer.from('0061736d01000000' + '0503010001' + '070a01066d656d6f72790200', 'hex');

// WASI preview1 layouts (wasi_snapshot_preview1 "subscription" and "event").
const SUBSCRIPTION_SIZE = 48;
const EVENT_SIZE = 32;
const EVENTS_AT = 2 * SUBSCRIPTION_SIZE;
const COUNT_AT = EVENTS_AT + 2 * EVENT_SIZE;
const EVENTTYPE_CLOCK = 0;
const EVENTTYPE_FD_WRITE = 2;
const CLOCK_MONOTONIC = 1;
const EVENT_HANGUP = 1;
/**
 * The longest one check waits: a pipe with room or without a reader
 * answers at once, a full one (a slow reader) only once it has room, so a
 * clock ends the wait. A clock of 0 would end it before the pipe is polled.
 */
const CHECK_WAIT_NS = 1_000_000n;

/**
 * A check that answers true once the pipe at `fd` has no reader, or
 * undefined when it cannot be asked: `fd` is not a pipe (a file, a
 * terminal, a socket, whose peer may have shut down only its own half),
 * or the runtime has no WASI.
 */
export function pipeReaderCheck(fd: number): (() => boolean) | undefined {
  try {
    if (!fstatSync(fd).isFIFO()) return undefined;
    const wasi = quietWasi(fd);
    const { Instance, Module } = (globalThis as unknown as { WebAssembly: WebAssemblyApi }).WebAssembly;
    const instance = new Instance(new Module(MEMORY_MODULE), {});
    wasi.initialize(instance);
    const memory = new DataView(instance.exports.memory.buffer);
    writeSubscriptions(memory);
    const poll = wasi.wasiImport.poll_oneoff as (
      subscriptions: number,
      events: number,
      count: number,
      countAt: number,
    ) => number;
    return () => poll(0, EVENTS_AT, 2, COUNT_AT) === 0 && readerGone(memory);
  } catch {
    return undefined;
  }
}

/**
 * A WASI whose standard streams are `fd`, made without node's warning that WASI is experimental, which is no news for
 * usersctl's user.
 */
function quietWasi(fd: number): WASI {
  const emitWarning = process.emitWarning;
  process.emitWarning = () => {};
  try {
    const { WASI: WasiClass } = process.getBuiltinModule('node:wasi');
    return new WasiClass({ version: 'preview1', stdin: fd, stdout: fd, stderr: fd });
  } finally {
    process.emitWarning = emitWarning;
  }
}

/** The two subscriptions every check asks: WASI's fd 1 (the pipe) writable or failed, and a clock of CHECK_WAIT_NS. */
function writeSubscriptions(memory: DataView): void {
  memory.setUint8(8, EVENTTYPE_FD_WRITE);
  memory.setUint32(16, 1, true);
  memory.setBigUint64(SUBSCRIPTION_SIZE, 1n, true);
  memory.setUint8(SUBSCRIPTION_SIZE + 8, EVENTTYPE_CLOCK);
  memory.setUint32(SUBSCRIPTION_SIZE + 16, CLOCK_MONOTONIC, true);
  memory.setBigUint64(SUBSCRIPTION_SIZE + 24, CHECK_WAIT_NS, true);
}

/** True when the pipe's event says it failed (POLLERR, on Linux) or hung up (EV_EOF, where kqueue says it so). */
function readerGone(memory: DataView): boolean {
  const count = memory.getUint32(COUNT_AT, true);
  for (let i = 0; i < count; i++) {
    const event = EVENTS_AT + i * EVENT_SIZE;
    if (memory.getUint8(event + 10) !== EVENTTYPE_FD_WRITE) continue;
    if (memory.getUint16(event + 8, true) !== 0 || (memory.getUint16(event + 24, true) & EVENT_HANGUP) !== 0)
      return true;
  }
  return false;
}
