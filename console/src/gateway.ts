/** The signed-in client: the key lives in this tab's sessionStorage only. */
import { GatewayClient, GatewayError } from "@agent-gateway/client";

import { Store } from "./store";

const TOKEN_KEY = "agent-gateway.key";

export const client = new Store<GatewayClient | null>(null);

export function storedToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** Checks the key with a cheap call; keeps it for the tab when the gateway takes it. */
export async function signIn(token: string): Promise<void> {
  const candidate = new GatewayClient({ token });
  await candidate.listSessions({ limit: 1 });
  sessionStorage.setItem(TOKEN_KEY, token);
  client.set(candidate);
}

export function signOut(): void {
  sessionStorage.removeItem(TOKEN_KEY);
  client.set(null);
}

export function gateway(): GatewayClient {
  const current = client.value;
  if (!current) throw new Error("not signed in");
  return current;
}

/** A refusal as a person reads it. */
export function describe(error: unknown): string {
  if (error instanceof GatewayError) {
    if (error.status === 401) return "The gateway refused this key.";
    const fields = error.problem.errors;
    if (Array.isArray(fields) && fields.length > 0) {
      const first = fields[0] as { location?: string; message?: string };
      return `${error.message} (${first.location ?? ""}: ${first.message ?? ""})`;
    }
    return error.message;
  }
  if (error instanceof TypeError) return "The gateway cannot be reached.";
  return error instanceof Error ? error.message : String(error);
}

export { GatewayError };
