/**
 * What a file-editing tool call changes, read from its input as each agent writes it (the
 * same readings as the gateway's ACP endpoint, app/api/acp/edits.py):
 *
 * - Claude Code, Gemini, Qwen, CodeBuddy: `Edit`/`replace`/`edit` {file_path, old_string,
 *   new_string}, `Write`/`write_file` {file_path, content}, `MultiEdit` {file_path, edits};
 * - OpenCode: `edit` {filePath, oldString, newString}, `write` {filePath, content},
 *   `multiedit` {filePath, edits}, `apply_patch`/`patch` {patchText} (`*** Begin Patch`), and
 *   permission requests {filepath, diff} with a unified diff;
 * - Copilot: `edit` {path, old_str, new_str}, `create` {path, file_text};
 * - Codex: {changes: [{path, kind: {type: add|delete|update}, diff}]} (a new file's text, a
 *   deleted file's text, or a unified diff) and the adapter's {changes: {path: {type,
 *   content|unified_diff}}}.
 */

export interface FileEdit {
  path: string;
  /** The text before: null for a new file (or unknown). */
  old: string | null;
  /** The text after: null when only a unified diff is known (or the file is deleted). */
  new: string | null;
  /** A unified diff, when that is what the agent gave. */
  unified: string | null;
}

type Input = Record<string, unknown>;

const PATH_KEYS = ["file_path", "filePath", "filepath", "absolute_path", "path", "notebook_path"];
const OLD_KEYS = ["old_string", "oldString", "old_str", "old_text", "oldText"];
const NEW_KEYS = ["new_string", "newString", "new_str", "new_text", "newText"];
const CONTENT_KEYS = ["content", "file_text"];
const PATCH_KEYS = ["patchText", "patch", "input"];
const PATCH_START = "*** Begin Patch";

function first(values: Input, keys: string[]): string | null {
  for (const key of keys) {
    const value = values[key];
    if (typeof value === "string") return value;
  }
  return null;
}

function isInput(value: unknown): value is Input {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The edits a tool input describes; [] when it names none (a command, a read). */
export function fileEdits(input: unknown): FileEdit[] {
  if (!isInput(input)) return [];
  const changes = input.changes;
  if (Array.isArray(changes) || isInput(changes)) return codexChanges(changes);
  const patch = first(input, PATCH_KEYS);
  if (patch !== null && patch.trimStart().startsWith(PATCH_START)) return patchEdits(patch);
  const path = first(input, PATH_KEYS);
  if (!path) return [];
  const replacement = first(input, NEW_KEYS);
  if (replacement !== null) {
    return [{ path, old: first(input, OLD_KEYS), new: replacement, unified: null }];
  }
  if (Array.isArray(input.edits)) {
    return input.edits.flatMap((raw): FileEdit[] => {
      if (!isInput(raw)) return [];
      const text = first(raw, NEW_KEYS);
      if (text === null) return [];
      return [{ path: first(raw, PATH_KEYS) ?? path, old: first(raw, OLD_KEYS), new: text, unified: null }];
    });
  }
  const whole = first(input, CONTENT_KEYS);
  if (whole !== null) return [{ path, old: null, new: whole, unified: null }];
  const diff = input.diff;
  if (typeof diff === "string" && diff) return [{ path, old: null, new: null, unified: diff }];
  return [];
}

function codexChanges(changes: unknown[] | Input): FileEdit[] {
  if (!Array.isArray(changes)) {
    return Object.entries(changes).flatMap(([path, raw]): FileEdit[] => {
      if (!isInput(raw)) return [];
      const type = raw.type;
      const text = first(raw, ["content", "unified_diff"]) ?? "";
      if (type === "add") return [{ path, old: null, new: text, unified: null }];
      if (type === "delete") return [{ path, old: text, new: "", unified: null }];
      return [{ path, old: null, new: null, unified: text }];
    });
  }
  return changes.flatMap((raw): FileEdit[] => {
    if (!isInput(raw)) return [];
    const path = first(raw, ["path"]);
    if (!path) return [];
    const kind = isInput(raw.kind) ? raw.kind.type : raw.kind;
    const diff = first(raw, ["diff"]) ?? "";
    if (kind === "add") return [{ path, old: null, new: diff, unified: null }];
    if (kind === "delete") return [{ path, old: diff, new: "", unified: null }];
    return [{ path, old: null, new: null, unified: diff }];
  });
}

/** The `*** Begin Patch` format: Add File (whole text), Delete File, Update File (hunks). */
function patchEdits(patch: string): FileEdit[] {
  const edits: FileEdit[] = [];
  let current: { path: string; mode: "add" | "update" | "delete"; lines: string[] } | null = null;
  const flush = (): void => {
    if (!current) return;
    const body = current.lines;
    if (current.mode === "add") {
      edits.push({ path: current.path, old: null, new: body.map((l) => l.slice(1)).join("\n"), unified: null });
    } else if (current.mode === "delete") {
      edits.push({ path: current.path, old: null, new: "", unified: null });
    } else {
      edits.push({ path: current.path, old: null, new: null, unified: body.join("\n") });
    }
    current = null;
  };
  for (const line of patch.split("\n")) {
    const header = /^\*\*\* (Add|Update|Delete) File: (.+)$/.exec(line);
    if (header) {
      flush();
      const mode = header[1] === "Add" ? "add" : header[1] === "Delete" ? "delete" : "update";
      current = { path: header[2] ?? "", mode, lines: [] };
    } else if (line.startsWith("*** End Patch") || line.startsWith(PATCH_START)) {
      flush();
    } else if (current && !line.startsWith("*** ")) {
      current.lines.push(line);
    }
  }
  flush();
  return edits;
}
