// Regenerates src/openapi.ts from the gateway's contract (docs/openapi.json) and sets this
// package's version to the API's (info.version). `--check` changes nothing and exits 1 when
// either is stale; the package's tests run the same comparison.
import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import openapiTS, { astToString } from "openapi-typescript";

const here = new URL("../", import.meta.url);
export const CONTRACT = new URL("../../docs/openapi.json", here);
export const TYPES = new URL("src/openapi.ts", here);
export const PACKAGE = new URL("package.json", here);

const HEADER =
  "// Generated from docs/openapi.json by openapi-typescript (npm run generate); do not edit.\n\n";

/** The types file as the contract makes it today. */
export async function generatedTypes() {
  const ast = await openapiTS(CONTRACT, { alphabetize: false, exportType: false });
  return HEADER + astToString(ast);
}

/** The API's version, which the package's version follows. */
export async function apiVersion() {
  return JSON.parse(await readFile(CONTRACT, "utf8")).info.version;
}

async function main() {
  const check = process.argv.includes("--check");
  const types = await generatedTypes();
  const version = await apiVersion();
  const pkg = JSON.parse(await readFile(PACKAGE, "utf8"));
  const current = await readFile(TYPES, "utf8").catch(() => "");
  const stale = [];
  if (current !== types) stale.push("src/openapi.ts");
  if (pkg.version !== version) stale.push(`package.json version ${pkg.version} (API ${version})`);
  if (check) {
    if (stale.length) {
      console.error(`stale: ${stale.join(", ")}; run npm run generate`);
      process.exit(1);
    }
    return;
  }
  await writeFile(TYPES, types);
  if (pkg.version !== version) {
    pkg.version = version;
    await writeFile(PACKAGE, JSON.stringify(pkg, null, 2) + "\n");
  }
  console.log(stale.length ? `updated: ${stale.join(", ")}` : "up to date");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
