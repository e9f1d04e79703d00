// Text out of uploaded files, and what parsing them must not do to the rest of the process: pdf.js ships core-js
// polyfills that overwrite built-ins (Array.prototype.push among them, about ten times slower), and the server would
// carry them for every request after its first PDF.
import { spawnSync } from 'node:child_process';
import { expect } from 'chai';
import { extractText } from '../server/services/knowledge/parsers.js';

/** A one-page PDF showing `text` in Helvetica, with a correct cross-reference table. */
function pdfOf(text: string): Buffer {
  const stream = `BT /F1 18 Tf 20 100 Td (${text}) Tj ET`;
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 400 144] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
    `<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
  ];
  let out = '%PDF-1.4\n';
  const offsets = objects.map((body, i) => {
    const at = out.length;
    out += `${i + 1} 0 obj\n${body}\nendobj\n`;
    return at;
  });
  const xref = out.length;
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, 'latin1');
}

describe('knowledge file parsers', function () {
  this.timeout(60_000);

  it('reads the text of a PDF', async () => {
    const text = await extractText(pdfOf('Refunds are paid within 14 days'), 'application/pdf');
    expect(text).to.contain('Refunds are paid within 14 days');
  });

  it('leaves the built-ins of the process as they were after loading the server and parsing PDFs', () => {
    // A fresh process: this one has loaded the server already. It keeps the built-ins before anything is imported.
    const script = `
      const before = { push: Array.prototype.push, parse: JSON.parse, toString: Function.prototype.toString };
      await import('./server/server.ts');
      const { extractText } = await import('./server/services/knowledge/parsers.ts');
      const pdf = Buffer.from(process.argv[1], 'base64');
      const texts = await Promise.all([extractText(pdf, 'application/pdf'), extractText(pdf, 'application/pdf')]);
      texts.push(await extractText(pdf, 'application/pdf'));
      const replaced = Object.entries(before).filter(([name, fn]) => ({ push: Array.prototype.push, parse: JSON.parse, toString: Function.prototype.toString })[name] !== fn).map(([name]) => name);
      process.stdout.write(JSON.stringify({ replaced, texts }));
      process.exit(0);
    `;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, pdfOf('Opening hours').toString('base64')], { cwd: process.cwd(), encoding: 'utf8', timeout: 50_000 });
    expect(child.status, child.stderr).to.equal(0);
    const result = JSON.parse(child.stdout.trim().split('\n').pop()!) as { replaced: string[]; texts: string[] };
    expect(result.texts).to.have.length(3);
    for (const text of result.texts) expect(text).to.contain('Opening hours');
    expect(result.replaced).to.deep.equal([]);
  });
});
