/**
 * Holds secrets (the admin password from the provisioning media, the VM owner's custom data and user data)
 * outside statechart context, logs and reports. Actors that need a secret receive this store as a dependency;
 * everything else sees only whether a secret is present.
 */
export type SecretName = 'password' | 'customData' | 'userData';

export class SecretStore {
  #values = new Map<SecretName, Buffer>();

  setPassword(password: string): void {
    this.set('password', Buffer.from(password, 'utf8'));
  }

  hasPassword(): boolean {
    return this.has('password');
  }

  /** Runs `use` with the password bytes, then nothing else can read them from here again until set. */
  withPassword<T>(use: (password: Buffer) => T): T {
    return this.with('password', use);
  }

  /** Keeps a copy of `bytes` under `name`, wiping what was there. */
  set(name: SecretName, bytes: Buffer): void {
    this.delete(name);
    this.#values.set(name, Buffer.from(bytes));
  }

  has(name: SecretName): boolean {
    return this.#values.has(name);
  }

  with<T>(name: SecretName, use: (bytes: Buffer) => T): T {
    const bytes = this.#values.get(name);
    if (!bytes) throw new Error(`no ${name} stored`);
    return use(bytes);
  }

  delete(name: SecretName): void {
    this.#values.get(name)?.fill(0);
    this.#values.delete(name);
  }

  clear(): void {
    for (const name of [...this.#values.keys()]) this.delete(name);
  }

  /** A scrubber holding copies of every secret stored now (wipe it when done). */
  scrubber(): SecretScrubber {
    return new SecretScrubber([...this.#values.values()]);
  }

  /** Never serialise a secret, whatever asks. */
  toJSON(): string {
    return '[SecretStore]';
  }
}

/**
 * `data` (a failure's supporting data) with the secrets the store holds now scrubbed out of every value: a failed
 * command's stderr is the command's to write, and a failure report or a log line must not carry what it printed.
 */
export function scrubData(store: SecretStore, data: ReadonlyArray<readonly [string, string]>): Array<[string, string]> {
  const scrubber = store.scrubber();
  try {
    return data.map(([key, value]) => [key, scrubber.scrub(Buffer.from(value)).toString('utf8')]);
  } finally {
    scrubber.wipe();
  }
}

/** What a scrubbed secret is replaced with. */
export const REDACTED = '[redacted]';
/** Shortest whole form scrubbed, and shortest piece of one scrubbed where a text was cut through it. */
const MIN_FORM_BYTES = 4;
const MIN_EDGE_BYTES = 6;
const MIN_LINE_BYTES = 8;

/**
 * Removes the run's secrets from free text a command or the kernel wrote (stderr, the kernel log) before it leaves
 * the process: each secret's bytes, their base64, each line of 8 bytes or more, and a piece of 6 bytes or more where
 * the text begins or ends inside one (a tail cut through it), each also as the kernel log escapes it. It holds copies
 * of the secrets: `wipe` zeroes them.
 */
export class SecretScrubber {
  readonly #forms: Buffer[];

  constructor(secrets: readonly Buffer[]) {
    const forms: Buffer[] = [];
    for (const secret of secrets) {
      const plain = [Buffer.from(secret)];
      for (const line of secret.toString('utf8').split(/\r?\n/)) if (Buffer.byteLength(line.trim()) >= MIN_LINE_BYTES) plain.push(Buffer.from(line.trim()));
      for (const form of plain) {
        const escaped = kmsgEscaped(form);
        forms.push(form, ...(escaped.equals(form) ? [] : [escaped]));
      }
      forms.push(Buffer.from(secret.toString('base64')));
    }
    this.#forms = forms.filter((f) => f.length >= MIN_FORM_BYTES).sort((a, b) => b.length - a.length);
  }

  /** `text` with every form of every secret replaced by `[redacted]`. */
  scrub(text: Buffer): Buffer {
    let out = text;
    for (const form of this.#forms) out = replaceAll(out, form);
    if (this.#forms.length === 0) return out;
    const bound = longestLine(out);
    const edges = this.#edgesFor(bound);
    return cutEdges(out, (line) => this.#cutLine(line, edges, bound));
  }

  /** Zeroes the copies. */
  wipe(): void {
    for (const form of this.#forms) form.fill(0);
    this.#forms.length = 0;
  }

  /**
   * The forms (by index) that hold each 6-byte window a line of at most `bound` bytes can begin or end inside them
   * on (a form's first and last `bound` bytes), keyed by a lossy hash of the window, never its bytes: a line's first
   * and last 6 bytes then name the only forms that can cut it, so a kernel log of thousands of lines is not tried
   * against thousands of forms one by one, and a secret of megabytes costs only its edges.
   */
  #edgesFor(bound: number): Map<number, number[]> {
    const edges = new Map<number, number[]>();
    const add = (index: number, form: Buffer, at: number) => {
      const key = windowHash(form, at);
      const holders = edges.get(key);
      if (holders === undefined) edges.set(key, [index]);
      else if (holders.at(-1) !== index) holders.push(index);
    };
    this.#forms.forEach((form, index) => {
      const last = form.length - MIN_EDGE_BYTES;
      const prefixes = Math.min(last, bound - MIN_EDGE_BYTES);
      for (let at = 0; at <= prefixes; at++) add(index, form, at);
      for (let at = Math.max(prefixes + 1, form.length - bound); at <= last; at++) add(index, form, at);
    });
    return edges;
  }

  /**
   * `line` cut by every form in order, as if each were tried (`cutLine`), trying only the forms its first or last
   * 6 bytes occur in (any other leaves it as it is); when a cut changes the line, the later forms are looked up
   * again, and once a cut has made it longer than `bound` (the windows indexed), they are tried one by one.
   */
  #cutLine(line: Buffer, edges: Map<number, number[]>, bound: number): Buffer {
    let out = line;
    let candidates = candidatesOf(out, edges, -1);
    for (let i = 0; i < candidates.length; i++) {
      const tried = candidates[i]!;
      const cut = cutLine(out, this.#forms[tried]!);
      if (cut === out) continue;
      out = cut;
      if (out.length > bound) return this.#forms.slice(tried + 1).reduce((l, form) => cutLine(l, form), out);
      candidates = candidatesOf(out, edges, tried);
      i = -1;
    }
    return out;
  }
}

/** The forms after `after`, in order, whose indexed windows hold the line's first or last 6 bytes. */
function candidatesOf(line: Buffer, edges: Map<number, number[]>, after: number): number[] {
  if (line.length < MIN_EDGE_BYTES) return [];
  const found = new Set<number>();
  for (const key of [windowHash(line, 0), windowHash(line, line.length - MIN_EDGE_BYTES)]) {
    for (const index of edges.get(key) ?? []) if (index > after) found.add(index);
  }
  return [...found].sort((a, b) => a - b);
}

/** The length of the longest line of `text`, in bytes. */
function longestLine(text: Buffer): number {
  let longest = 0;
  let from = 0;
  for (let nl = text.indexOf(0x0a); nl >= 0; nl = text.indexOf(0x0a, from)) {
    longest = Math.max(longest, nl - from);
    from = nl + 1;
  }
  return Math.max(longest, text.length - from);
}

/** A lossy 32-bit hash of the 6 bytes of `bytes` at `at`. */
function windowHash(bytes: Buffer, at: number): number {
  return (bytes.readUIntLE(at, MIN_EDGE_BYTES) % 4294967291) >>> 0;
}

/**
 * `bytes` as /dev/kmsg prints them: a control byte, a backslash and every byte past ASCII as `\xNN`, so a secret the
 * kernel log carries (`Pa\x5cword`, `caf\xc3\xa9`) is found there too.
 */
export function kmsgEscaped(bytes: Buffer): Buffer {
  // Written byte by byte into a buffer (no string holds the secret), so `wipe` zeroes it as it does the others.
  const out = Buffer.alloc(bytes.length * 4);
  let at = 0;
  for (const byte of bytes) {
    if (byte >= 0x20 && byte < 0x7f && byte !== 0x5c) out[at++] = byte;
    else at += out.write(`\\x${byte.toString(16).padStart(2, '0')}`, at, 'latin1');
  }
  return out.subarray(0, at);
}

function replaceAll(text: Buffer, form: Buffer): Buffer {
  let at = text.indexOf(form);
  if (at < 0) return text;
  const parts: Buffer[] = [];
  let from = 0;
  while (at >= 0) {
    parts.push(text.subarray(from, at), Buffer.from(REDACTED));
    from = at + form.length;
    at = text.indexOf(form, from);
  }
  parts.push(text.subarray(from));
  return Buffer.concat(parts);
}

/** Scrubs, on every line, a piece of any form the line starts with (a suffix of it) or ends with (a prefix of it). */
function cutEdges(text: Buffer, cut: (line: Buffer) => Buffer): Buffer {
  const lines: Buffer[] = [];
  const newline = Buffer.from('\n');
  let from = 0;
  for (let nl = text.indexOf(0x0a); nl >= 0; nl = text.indexOf(0x0a, from)) {
    lines.push(cut(text.subarray(from, nl)), newline);
    from = nl + 1;
  }
  lines.push(cut(text.subarray(from)));
  return Buffer.concat(lines);
}

export function cutLine(line: Buffer, form: Buffer): Buffer {
  let out = line;
  if (out.length < MIN_EDGE_BYTES) return out;
  // The longest suffix of the form the line starts with: the earliest place the line's first bytes occur in it.
  const head = out.subarray(0, MIN_EDGE_BYTES);
  for (let p = form.indexOf(head, 1); p >= 0; p = form.indexOf(head, p + 1)) {
    const n = form.length - p;
    if (n <= out.length && out.subarray(0, n).equals(form.subarray(p))) {
      out = Buffer.concat([Buffer.from(REDACTED), out.subarray(n)]);
      break;
    }
  }
  if (out.length < MIN_EDGE_BYTES) return out;
  // The longest prefix of the form the line ends with.
  const tail = Buffer.from(out.subarray(out.length - MIN_EDGE_BYTES));
  let longest = 0;
  for (let p = form.indexOf(tail); p >= 0 && p + MIN_EDGE_BYTES < form.length; p = form.indexOf(tail, p + 1)) {
    const n = p + MIN_EDGE_BYTES;
    if (n <= out.length && out.subarray(out.length - n).equals(form.subarray(0, n))) longest = n;
  }
  return longest > 0 ? Buffer.concat([out.subarray(0, out.length - longest), Buffer.from(REDACTED)]) : out;
}
