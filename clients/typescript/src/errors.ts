/**
 * Errors this client throws.
 *
 *   GatewayError          the gateway answered with a problem (4xx/5xx, problem+json)
 *   StreamError           the event stream cannot go on (a refused cursor, a session gone)
 *
 * Network failures of a REST call surface as the platform's own `TypeError` from `fetch`;
 * the event stream retries them by itself.
 */

/** An RFC 9457 problem document as the gateway sends it, with its extra fields. */
export interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  [field: string]: unknown;
}

/** The gateway refused a request: `status` and the problem document say why. */
export class GatewayError extends Error {
  readonly status: number;
  readonly problem: Problem;
  /** Seconds from `Retry-After`, when the gateway sent one (429, 503). */
  readonly retryAfterS: number | null;

  constructor(status: number, problem: Problem, retryAfterS: number | null = null) {
    super(problem.detail ?? problem.title ?? `the gateway answered ${status}`);
    this.name = "GatewayError";
    this.status = status;
    this.problem = problem;
    this.retryAfterS = retryAfterS;
  }

  /** The problem's stable type's last segment (`not_found`, `cursor_expired`, …). */
  get kind(): string {
    const type = this.problem.type ?? "";
    return type.slice(type.lastIndexOf("/") + 1) || String(this.status);
  }
}

/** Builds the error for a non-2xx response (its body read as a problem when it is JSON). */
export async function errorFrom(response: Response): Promise<GatewayError> {
  let problem: Problem;
  const text = await response.text().catch(() => "");
  try {
    const parsed: unknown = JSON.parse(text);
    problem = typeof parsed === "object" && parsed !== null ? (parsed as Problem) : { detail: text };
  } catch {
    problem = { detail: text.slice(0, 500) || response.statusText };
  }
  const retryAfter = Number(response.headers.get("retry-after"));
  return new GatewayError(
    response.status,
    problem,
    Number.isFinite(retryAfter) && response.headers.has("retry-after") ? retryAfter : null,
  );
}
