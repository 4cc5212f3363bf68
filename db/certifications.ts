// Contract certifications: one row per run of an operation's fixtures through a provider.
import type { Queryable } from './pool.ts';

export interface Certification {
  id: number;
  provider: string;
  model: string;
  operation: string;
  templateVersion: string;
  outputSchemaHash: string;
  passed: boolean;
  fixtures: number;
  failures: { fixture: string; reason: string }[];
  promptTokens: number;
  certifiedAt: Date;
}

const toCertification = (r: Record<string, unknown>): Certification => ({
  id: r.id as number,
  provider: r.provider as string,
  model: r.model as string,
  operation: r.operation as string,
  templateVersion: r.template_version as string,
  outputSchemaHash: r.output_schema_hash as string,
  passed: r.passed as boolean,
  fixtures: r.fixtures as number,
  failures: r.failures as Certification['failures'],
  promptTokens: r.prompt_tokens as number,
  certifiedAt: r.certified_at as Date,
});

export async function recordCertification(q: Queryable, c: Omit<Certification, 'id'>): Promise<Certification> {
  const { rows } = await q.query(
    `INSERT INTO certifications (provider, model, operation, template_version, output_schema_hash, passed, fixtures, failures, prompt_tokens, certified_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING *`,
    [c.provider, c.model, c.operation, c.templateVersion, c.outputSchemaHash, c.passed, c.fixtures, JSON.stringify(c.failures), c.promptTokens, c.certifiedAt],
  );
  return toCertification(rows[0]);
}

/**
 * The newest certification of the provider for the operation under exactly this model, prompt version
 * and output schema: only that one counts. A newer failed run withdraws an older pass.
 */
/** What a certification is earned with; it counts only while all of it is still current. */
export type CertificationTerms = Pick<Certification, 'provider' | 'model' | 'operation' | 'templateVersion' | 'outputSchemaHash'>;

export async function findCurrentCertification(q: Queryable, p: CertificationTerms): Promise<Certification | undefined> {
  const { rows } = await q.query(
    `SELECT * FROM certifications
     WHERE provider = $1 AND operation = $2 AND model = $3 AND template_version = $4 AND output_schema_hash = $5
     ORDER BY certified_at DESC, id DESC LIMIT 1`,
    [p.provider, p.operation, p.model, p.templateVersion, p.outputSchemaHash],
  );
  return rows[0] ? toCertification(rows[0]) : undefined;
}

/** The newest certification per (provider, operation), whatever it was earned with. */
export async function latestCertifications(q: Queryable): Promise<Certification[]> {
  const { rows } = await q.query(
    `SELECT DISTINCT ON (provider, operation) * FROM certifications ORDER BY provider, operation, certified_at DESC, id DESC`,
  );
  return rows.map(toCertification);
}
