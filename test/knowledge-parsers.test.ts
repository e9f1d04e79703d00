// Text out of uploaded files, and what parsing them must not do to the rest of the process: pdf.js ships core-js
// polyfills that overwrite built-ins (Array.prototype.push among them, about ten times slower), and the server would
// carry them for every request after its first PDF.
import { spawnSync } from 'node:child_process';
import { expect } from 'chai';
import { crc32 } from 'node:zlib';
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

describe('knowledge file parsers, by media type', function () {
  this.timeout(60_000);

  /** A zip archive of stored (uncompressed) entries: what a .docx is. */
  function zipOf(files: Record<string, string>): Buffer {
    const locals: Buffer[] = [];
    const centrals: Buffer[] = [];
    let offset = 0;
    for (const [name, text] of Object.entries(files)) {
      const data = Buffer.from(text);
      const path = Buffer.from(name);
      const fields = (head: Buffer, at: number) => {
        head.writeUInt32LE(crc32(data), at);
        head.writeUInt32LE(data.length, at + 4);
        head.writeUInt32LE(data.length, at + 8);
        head.writeUInt16LE(path.length, at + 12);
      };
      const local = Buffer.alloc(30);
      local.writeUInt32LE(0x04034b50, 0);
      local.writeUInt16LE(20, 4);
      fields(local, 14);
      const central = Buffer.alloc(46);
      central.writeUInt32LE(0x02014b50, 0);
      central.writeUInt16LE(20, 4);
      central.writeUInt16LE(20, 6);
      fields(central, 16);
      central.writeUInt32LE(offset, 42);
      locals.push(local, path, data);
      centrals.push(central, path);
      offset += local.length + path.length + data.length;
    }
    const directory = Buffer.concat(centrals);
    const end = Buffer.alloc(22);
    end.writeUInt32LE(0x06054b50, 0);
    end.writeUInt16LE(Object.keys(files).length, 8);
    end.writeUInt16LE(Object.keys(files).length, 10);
    end.writeUInt32LE(directory.length, 12);
    end.writeUInt32LE(offset, 16);
    return Buffer.concat([...locals, directory, end]);
  }

  /** A minimal Word document (the three parts mammoth reads) with one paragraph per line. */
  const docxOf = (lines: string[]) => zipOf({
    '[Content_Types].xml': '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
    '_rels/.rels': '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>',
    'word/document.xml': `<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>${lines.map((l) => `<w:p><w:r><w:t>${l}</w:t></w:r></w:p>`).join('')}</w:body></w:document>`,
  });

  it('reads text and Markdown as written, whatever the case and parameters of the type', async () => {
    const md = '# Returns\n\n*Keep* the receipt: <b>always</b>.';
    expect(await extractText(Buffer.from(md), 'text/markdown')).to.equal(md);
    expect(await extractText(Buffer.from(md), 'Text/Markdown ; charset=utf-8')).to.equal(md);
    expect(await extractText(Buffer.from('Plain <b>words</b>'), ' TEXT/PLAIN;charset=utf-8')).to.equal('Plain <b>words</b>');
  });

  it('reads HTML as its visible text: no link or image addresses, no navigation, scripts or styles', async () => {
    const html = '<html><head><style>p { color: red }</style><script>var secret = 1</script></head><body><nav><a href="/menu">Menu</a></nav>'
      + '<h1>Opening hours</h1><p>We open at <a href="https://example.com/hours">nine</a>.</p><img src="banner.png" alt="Banner"><p>' + 'long '.repeat(40) + 'line</p></body></html>';
    const expected = `OPENING HOURS\n\nWe open at nine.\n\n${'long '.repeat(40)}line`;
    expect(await extractText(Buffer.from(html), 'text/html')).to.equal(expected);
    expect(await extractText(Buffer.from(html), 'Text/HTML; charset=utf-8')).to.equal(expected);
  });

  it('reads the paragraphs of a Word document', async () => {
    const text = await extractText(docxOf(['Refunds take five days.', 'Keep the receipt.']), 'application/vnd.openxmlformats-officedocument.wordprocessingml.document');
    expect(text.trim().split(/\n+/)).to.deep.equal(['Refunds take five days.', 'Keep the receipt.']);
  });

  it('refuses a type it cannot read, naming it', async () => {
    for (const [type, named] of [['image/png', 'image/png'], ['Application/Zip; x=1', 'application/zip'], ['application/msword', 'application/msword']]) {
      const err = await extractText(Buffer.from('x'), type!).then(() => null, (e: Error) => e);
      expect(err?.message, type).to.equal(`${named} documents cannot be indexed`);
    }
  });
});
