/** What a users-server command reads and writes: given, so tests run commands in-process. */
export interface CommandIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: NodeJS.ProcessEnv;
  /** Where `accounts add` reads a password; process.stdin when absent. */
  stdin?: PasswordInput;
}

/** What a command reads a password from: process.stdin, or a stream in tests. */
export interface PasswordInput extends NodeJS.ReadableStream {
  isTTY?: boolean;
  setRawMode?: (mode: boolean) => unknown;
}
