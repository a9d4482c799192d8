import type { Provider } from "@agent-gateway/client";

import { gateway } from "../gateway";
import { Store } from "../store";

export const providers = new Store<Provider[] | null>(null);

export async function loadProviders(fresh = false): Promise<Provider[]> {
  const list = await gateway().listProviders({ fresh });
  providers.set(list);
  return list;
}

/** What a provider's health comes to here: it can take a turn, it runs but its CLI has no
 * credential (it needs a login), it cannot run (missing, broken), or it is switched off. */
export type ProviderState = "available" | "needs_login" | "unavailable" | "disabled";

export interface Readiness {
  ok: boolean;
  state: ProviderState;
  /** A few words: "available", "needs login", "unavailable", "disabled". */
  text: string;
  /** What to do about it (the gateway's reason: for a login, the command or variable). */
  fix: string | null;
}

/** Whether a provider can take a turn now, and if not, why and what to do. */
export function readiness(provider: Provider): Readiness {
  if (!provider.enabled) return { ok: false, state: "disabled", text: "disabled", fix: null };
  const { status, reason } = provider.health;
  if (status === "needs_login") {
    return { ok: false, state: "needs_login", text: "needs login", fix: reason };
  }
  if (status === "unavailable" || !provider.health.available) {
    const text = provider.installed_version ? "unavailable" : "unavailable: CLI missing";
    return { ok: false, state: "unavailable", text, fix: reason };
  }
  return { ok: true, state: "available", text: "available", fix: null };
}
