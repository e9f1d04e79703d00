// No two modules of the server import each other, directly or around a loop (type imports count: a loop of types
// is how a loop of values starts). Shared words live in leaf modules (messages/types.ts, sockets/types.ts, ...).
// An exception would be listed in KNOWN with the reason it cannot be a leaf yet; none is.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import ts from 'typescript';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DIRS = ['server', 'sockets', 'routes', 'db'];

/** Loops that predate the rule, by the files in them (none are left; a new exception would be listed here). */
const KNOWN: string[][] = [];

function sources(dir: string, out: Set<string>): Set<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) sources(full, out);
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) out.add(full);
  }
  return out;
}

/** Each file's relative imports and re-exports, resolved to the files they name. */
function importGraph(): Map<string, string[]> {
  const files = new Set<string>();
  for (const dir of DIRS) sources(path.join(ROOT, dir), files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, false);
    const targets = importedFiles
      .map((i) => i.fileName)
      .filter((name) => name.startsWith('.'))
      .map((name) => path.resolve(path.dirname(file), name).replace(/\.js$/, '.ts'))
      .filter((target) => files.has(target));
    graph.set(file, targets);
  }
  return graph;
}

/** Strongly connected components with more than one file (Tarjan). */
function loops(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(path.relative(ROOT, w).split(path.sep).join('/'));
      } while (w !== v);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe('import structure', () => {
  it('has no import loop but the known older ones, and none in messages, conversations, sockets or the domain events', () => {
    const found = loops(importGraph());
    const known = new Set(KNOWN.flat());
    const fresh = found.filter((loop) => loop.some((file) => !known.has(file)));
    expect(fresh, 'new import loops').to.deep.equal([]);
    const guarded = /^(server\/services\/(messages|conversations)\/|sockets\/|server\/events\.ts$)/;
    expect(found.flat().filter((file) => guarded.test(file))).to.deep.equal([]);
  });

  it('finds a loop when there is one (the check itself works)', () => {
    const a = path.join(ROOT, 'a.ts');
    const b = path.join(ROOT, 'b.ts');
    const c = path.join(ROOT, 'c.ts');
    expect(loops(new Map([[a, [b]], [b, [c]], [c, [a]]]))).to.deep.equal([['a.ts', 'b.ts', 'c.ts']]);
    expect(loops(new Map([[a, [b]], [b, [c]], [c, []]]))).to.deep.equal([]);
  });
});
