// bcrypt hashing with the configured cost; unknown users are checked against a dummy hash so timing matches.
import bcrypt from 'bcrypt';

export class PasswordHasher {
  private dummyHash: Promise<string>;

  constructor(private readonly cost: number) {
    this.dummyHash = bcrypt.hash('not-a-real-password', cost);
  }

  hash(password: string): Promise<string> {
    return bcrypt.hash(password, this.cost);
  }

  /** Always spends one bcrypt comparison, even when there is no stored hash. */
  async verify(password: string, hash: string | null | undefined): Promise<boolean> {
    const ok = await bcrypt.compare(password, hash ?? (await this.dummyHash));
    return ok && !!hash;
  }
}
