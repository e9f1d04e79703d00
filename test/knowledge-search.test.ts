// Knowledge search answers: the order (ts_rank_cd, then chunk id), the scores, the snippets (ts_headline of the
// returned chunks), the limit, the source filter and the websearch syntax, checked against a plain reference query
// over the same chunks, so any faster way of running the search must give exactly the same answer.
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp, type SignedUp } from './helpers/factories.js';
import { indexed } from './helpers/knowledge.js';

const HEADLINE = 'MaxWords=40, MinWords=15, MaxFragments=2, FragmentDelimiter=" … "';

interface Hit {
  chunkId: string;
  documentId: string;
  title: string;
  snippet: string;
  score: number;
}

describe('knowledge search answers', function () {
  this.timeout(60_000);
  let owner: SignedUp;
  let other: SignedUp;
  const ids: Record<string, string> = {};
  const search = async (query: string, as = owner) => {
    const res = await as.api.get(`/knowledge/search?${query}`, { token: as.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res.body.data as Hit[];
  };

  /** What the search must answer: every matching chunk ranked by a plain query, headlined, best first. */
  const reference = async (q: string, limit = 10, sourceId?: string): Promise<Hit[]> => {
    const { knex } = sharedServer().server.db;
    const result = await knex.raw(
      `select c.id as "chunkId", c.source_id as "documentId", s.title, ts_rank_cd(c.tsv, q) as score, ts_headline('english', c.content, q, ?) as snippet
         from knowledge_chunks c join knowledge_sources s on s.id = c.source_id, websearch_to_tsquery('english', ?) q
        where c.organization_id = ? and c.tsv @@ q ${sourceId ? 'and c.source_id = ?' : ''}
        order by score desc, c.id limit ?`,
      [HEADLINE, q, owner.orgId, ...(sourceId ? [sourceId] : []), limit],
    );
    return (result.rows as Hit[]).map((r) => ({ chunkId: r.chunkId, documentId: r.documentId, title: r.title, snippet: r.snippet, score: Number(r.score) }));
  };

  before(async () => {
    const { server, baseUrl } = sharedServer();
    [owner, other] = [await signUp(server, baseUrl), await signUp(server, baseUrl)];
    const sources: [string, string][] = [
      ['Refund policy', 'Refunds are paid within five days. A refund goes back to the card you paid with. Ask support for a refund.'],
      ['Shipping', 'We ship parcels every day. A refund is possible for lost parcels.'],
      ['Returns', 'Returns and refunds: a refund needs the receipt of the purchase.'],
      ['Twin one', 'Every refund is logged.'],
      ['Twin two', 'Every refund is logged.'],
      ['Unrelated', 'Nothing to see here at all.'],
    ];
    for (const [title, content] of sources) {
      const created = await owner.api.post('/knowledge', { title, source: 'text', content }, { token: owner.accessToken });
      expect(created.status).to.equal(201);
      ids[title] = created.body.data.id;
    }
    for (const id of Object.values(ids)) expect((await indexed(server, owner, id)).status).to.equal('indexed');
    const theirs = await other.api.post('/knowledge', { title: 'Their refunds', source: 'text', content: 'A refund of another organization.' }, { token: other.accessToken });
    expect((await indexed(server, other, theirs.body.data.id)).status).to.equal('indexed');
  });

  it('ranks by ts_rank_cd, ties by chunk id, with the headline of each returned chunk', async () => {
    const hits = await search('q=refund');
    expect(hits).to.deep.equal(await reference('refund'));
    expect(hits.map((h) => Object.keys(h))).to.deep.equal(hits.map(() => ['chunkId', 'documentId', 'title', 'snippet', 'score']));
    // Three mentions first; the twins score alike and come in chunk id order; a source without the word is absent.
    expect(hits[0]!.documentId).to.equal(ids['Refund policy']);
    expect(hits.map((h) => h.documentId)).to.have.members(['Refund policy', 'Shipping', 'Returns', 'Twin one', 'Twin two'].map((t) => ids[t]));
    const twins = hits.filter((h) => h.title.startsWith('Twin'));
    expect(twins[0]!.score).to.equal(twins[1]!.score);
    expect(twins[0]!.chunkId < twins[1]!.chunkId).to.equal(true);
    for (let i = 1; i < hits.length; i++) expect(hits[i - 1]!.score).to.be.at.least(hits[i]!.score);
    expect(hits[0]!.score).to.be.greaterThan(hits.at(-1)!.score);
    expect(hits[0]!.snippet).to.contain('<b>refund</b>').and.contain('<b>Refunds</b>');
    expect(hits.find((h) => h.title === 'Twin one')!.snippet).to.equal('Every <b>refund</b> is logged');
  });

  it('keeps the limit, the source filter and the websearch syntax', async () => {
    expect(await search('q=refund&limit=2')).to.deep.equal(await reference('refund', 2));
    expect(await search('q=refund&limit=2')).to.deep.equal((await search('q=refund')).slice(0, 2));
    const returns = await search(`q=refund&sourceId=${ids['Returns']}`);
    expect(returns).to.deep.equal(await reference('refund', 10, ids['Returns']));
    expect(returns.map((h) => h.documentId)).to.deep.equal([ids['Returns']]);
    const phrase = await search(`q=${encodeURIComponent('"refund goes back"')}`);
    expect(phrase.map((h) => h.title)).to.deep.equal(['Refund policy']);
    expect(phrase).to.deep.equal(await reference('"refund goes back"'));
    const excluded = await search(`q=${encodeURIComponent('refund -parcels')}`);
    expect(excluded.map((h) => h.title)).to.not.include('Shipping');
    expect(excluded).to.deep.equal(await reference('refund -parcels'));
    const either = await search(`q=${encodeURIComponent('parcels or receipt')}`);
    expect(either.map((h) => h.title).sort()).to.deep.equal(['Returns', 'Shipping']);
    expect(either).to.deep.equal(await reference('parcels or receipt'));
  });

  it('finds nothing for words no chunk holds, stop words alone, or in another organization', async () => {
    expect(await search('q=zzqxjv')).to.deep.equal([]);
    expect(await search('q=the')).to.deep.equal([]);
    expect((await search('q=refund', other)).map((h) => h.title)).to.deep.equal(['Their refunds']);
    const foreign = await other.api.get(`/knowledge/search?q=refund&sourceId=${ids['Returns']}`, { token: other.accessToken });
    expect(foreign.status).to.equal(404);
  });

  it('refuses a query it cannot take', async () => {
    for (const query of ['', 'q=', 'q=refund&limit=0', 'q=refund&limit=21', 'q=refund&sourceId=nope', `q=${'a'.repeat(501)}`]) {
      const res = await owner.api.get(`/knowledge/search?${query}`, { token: owner.accessToken });
      expect(res.status, query).to.equal(400);
      expect(res.body.error.code, query).to.equal('validation_failed');
    }
    expect((await owner.api.get('/knowledge/search?q=refund')).status).to.equal(401);
  });
});
