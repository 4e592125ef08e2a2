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

  /** Never serialise a secret, whatever asks. */
  toJSON(): string {
    return '[SecretStore]';
  }
}
