/**
 * Holds secrets (the admin password from the provisioning media) outside statechart context, logs and
 * reports. Actors that need a secret receive this store as a dependency; everything else sees only whether a
 * secret is present.
 */
export class SecretStore {
  #password: Buffer | null = null;

  setPassword(password: string): void {
    this.clear();
    this.#password = Buffer.from(password, 'utf8');
  }

  hasPassword(): boolean {
    return this.#password !== null;
  }

  /** Runs `use` with the password bytes, then nothing else can read them from here again until set. */
  withPassword<T>(use: (password: Buffer) => T): T {
    if (!this.#password) throw new Error('no password stored');
    return use(this.#password);
  }

  clear(): void {
    this.#password?.fill(0);
    this.#password = null;
  }

  /** Never serialise a secret, whatever asks. */
  toJSON(): string {
    return '[SecretStore]';
  }
}
