// Plain text out of the formats knowledge accepts: text, Markdown, HTML, PDF and DOCX.
import { convert } from 'html-to-text';
import mammoth from 'mammoth';
import { keepingBuiltins } from '../../builtins.js';

/**
 * pdf-parse, loaded on the first PDF. Its pdf.js build installs core-js polyfills over the process's own built-ins
 * when it loads (and again when its worker code loads, at the first parse): `Array.prototype.push` among them, a
 * JavaScript function some ten times slower than V8's, which every request of the server then paid for. So it is
 * imported on demand and each parse runs under `keepingBuiltins`, which puts the originals back.
 */
let pdfParse: Promise<typeof import('pdf-parse')> | null = null;

async function pdfText(body: Buffer): Promise<string> {
  return keepingBuiltins(async () => {
    const { PDFParse } = await (pdfParse ??= import('pdf-parse'));
    const parser = new PDFParse({ data: new Uint8Array(body) });
    try {
      return (await parser.getText()).text;
    } finally {
      await parser.destroy();
    }
  });
}

export function htmlToText(html: string): string {
  return convert(html, {
    wordwrap: false,
    selectors: [
      { selector: 'a', options: { ignoreHref: true } },
      { selector: 'img', format: 'skip' },
      { selector: 'nav', format: 'skip' },
      { selector: 'script', format: 'skip' },
      { selector: 'style', format: 'skip' },
    ],
  });
}

/** The text of a file by its media type; throws for a file that cannot be read (the source then fails). */
export async function extractText(body: Buffer, mimeType: string): Promise<string> {
  const type = mimeType.split(';')[0]!.trim().toLowerCase();
  switch (type) {
    case 'text/plain':
    case 'text/markdown':
      return body.toString('utf8');
    case 'text/html':
      return htmlToText(body.toString('utf8'));
    case 'application/pdf':
      return pdfText(body);
    case 'application/vnd.openxmlformats-officedocument.wordprocessingml.document':
      return (await mammoth.extractRawText({ buffer: body })).value;
    default:
      throw new Error(`${type} documents cannot be indexed`);
  }
}
