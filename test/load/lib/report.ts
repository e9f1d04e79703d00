// Results: every figure sits next to its baseline from the same run, with the ratio app / baseline.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export type Status = 'ok' | 'skipped' | 'failed';

export interface Row {
  metric: string;
  unit: string;
  app: number | string | null;
  baseline: number | string | null;
  /** app / baseline, when both are numbers. */
  ratio: number | null;
  note?: string;
  /** Set when the generator, not the server, limited this figure. */
  invalid?: string | null;
}

export interface ScenarioResult {
  name: string;
  status: Status;
  /** Why it was skipped or failed. */
  reason?: string;
  seconds: number;
  rows: Row[];
  details: Record<string, unknown>;
}

export function row(metric: string, unit: string, app: number | string | null, baseline: number | string | null, extra: { note?: string; invalid?: string | null } = {}): Row {
  const ratio = typeof app === 'number' && typeof baseline === 'number' && baseline !== 0 ? Math.round((app / baseline) * 1000) / 1000 : null;
  return { metric, unit, app, baseline, ratio, ...(extra.note ? { note: extra.note } : {}), ...(extra.invalid ? { invalid: extra.invalid } : {}) };
}

/** Joins the reasons two measures (app and baseline) were invalid. */
export function invalidOf(app: string | null | undefined, baseline: string | null | undefined): string | null {
  const parts = [app ? `app: ${app}` : '', baseline ? `baseline: ${baseline}` : ''].filter(Boolean);
  return parts.length ? parts.join('; ') : null;
}

const fmt = (v: number | string | null, unit: string) => {
  if (v === null) return '-';
  if (typeof v === 'string') return v;
  const digits = Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2;
  return `${v.toFixed(digits)}${unit ? ` ${unit}` : ''}`;
};

export function formatTable(results: ScenarioResult[]): string {
  const header = ['scenario', 'metric', 'app', 'baseline', 'app/base', 'note'];
  const lines: string[][] = [];
  for (const r of results) {
    if (r.status !== 'ok') {
      lines.push([r.name, r.status.toUpperCase(), '-', '-', '-', r.reason ?? '']);
      continue;
    }
    for (const x of r.rows) {
      const note = [x.invalid ? `INVALID (${x.invalid})` : '', x.note ?? ''].filter(Boolean).join('; ');
      lines.push([r.name, x.metric, fmt(x.app, x.unit), fmt(x.baseline, x.unit), x.ratio === null ? '-' : `${x.ratio.toFixed(2)}x`, note]);
    }
  }
  const widths = header.map((h, i) => Math.min(i === 5 ? 200 : 60, Math.max(h.length, ...lines.map((l) => l[i]!.length))));
  const pad = (cells: string[]) => cells.map((c, i) => (i >= 2 && i <= 4 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ').trimEnd();
  return [pad(header), widths.map((w) => '-'.repeat(w)).join('  '), ...lines.map(pad)].join('\n');
}

export function writeReport(dir: string, report: Record<string, unknown>): string {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  return file;
}
