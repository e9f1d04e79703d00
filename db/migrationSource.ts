// Migrations from the source (.ts, run through tsx) or from the build (.js in dist/), recorded under one name.
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Knex } from 'knex';

interface MigrationFile {
  /** The name recorded in knex_migrations: the source file's, `<timestamp>_<name>.ts`. */
  name: string;
  file: string;
}

/**
 * knex records a migration by its file name, so a database migrated by `npm start` (.ts) would look corrupt to the
 * build (.js) and the reverse. Each migration is therefore recorded by its source name, whichever file is loaded.
 */
export class SourceNamedMigrations implements Knex.MigrationSource<MigrationFile> {
  constructor(private readonly directory: string) {}

  async getMigrations(): Promise<MigrationFile[]> {
    const files = (await readdir(this.directory)).filter((f) => /\.(ts|js)$/.test(f) && !f.endsWith('.d.ts'));
    return files.map((file) => ({ file, name: file.replace(/\.js$/, '.ts') })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  getMigrationName(migration: MigrationFile): string {
    return migration.name;
  }

  async getMigration(migration: MigrationFile): Promise<Knex.Migration> {
    return (await import(pathToFileURL(path.join(this.directory, migration.file)).href)) as Knex.Migration;
  }
}
