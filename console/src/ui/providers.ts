import type { Provider } from "@agent-gateway/client";

import { gateway } from "../gateway";
import { Store } from "../store";

export const providers = new Store<Provider[] | null>(null);

export async function loadProviders(fresh = false): Promise<Provider[]> {
  const list = await gateway().listProviders({ fresh });
  providers.set(list);
  return list;
}

/** Whether a provider can take a turn now, and if not, why, in a few words. */
export function readiness(provider: Provider): { ok: boolean; text: string } {
  if (!provider.enabled) return { ok: false, text: "disabled" };
  if (!provider.installed_version) return { ok: false, text: "cannot run: CLI missing" };
  if (!provider.health.available) {
    return { ok: false, text: `cannot run: ${provider.health.reason ?? "unavailable"}` };
  }
  return { ok: true, text: "available" };
}
