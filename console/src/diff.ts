/** Line diffs for display: of two texts (an edit's before and after), or read from a unified diff. */

export type RowKind = "same" | "added" | "removed" | "hunk" | "meta";

/** One line of a diff, with its numbers on each side (null where it has none). */
export interface DiffLine {
  kind: RowKind;
  text: string;
  oldNo: number | null;
  newNo: number | null;
}

/** One file's diff. */
export interface FileDiff {
  path: string;
  lines: DiffLine[];
  additions: number;
  deletions: number;
}

const MAX_CELLS = 4_000_000; // beyond this, a whole-replacement diff (no LCS table)

function splitLines(text: string): string[] {
  if (text === "") return [];
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines;
}

/** The lines of `before` → `after` (longest common subsequence; both null-safe). */
export function diffTexts(path: string, before: string | null, after: string | null): FileDiff {
  const a = splitLines(before ?? "");
  const b = splitLines(after ?? "");
  // Common head and tail first: most edits touch a few lines of a long text.
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (
    tail < a.length - head &&
    tail < b.length - head &&
    a[a.length - 1 - tail] === b[b.length - 1 - tail]
  )
    tail++;
  const midA = a.slice(head, a.length - tail);
  const midB = b.slice(head, b.length - tail);
  const ops: ["same" | "added" | "removed", string][] = [];
  for (const line of a.slice(0, head)) ops.push(["same", line]);
  if (midA.length * midB.length > MAX_CELLS) {
    for (const line of midA) ops.push(["removed", line]);
    for (const line of midB) ops.push(["added", line]);
  } else {
    const n = midA.length;
    const m = midB.length;
    const table = new Uint32Array((n + 1) * (m + 1));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        table[i * (m + 1) + j] =
          midA[i] === midB[j]
            ? (table[(i + 1) * (m + 1) + j + 1] ?? 0) + 1
            : Math.max(table[(i + 1) * (m + 1) + j] ?? 0, table[i * (m + 1) + j + 1] ?? 0);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && midA[i] === midB[j]) {
        ops.push(["same", midA[i] ?? ""]);
        i++;
        j++;
      } else if (i < n && (j >= m || (table[(i + 1) * (m + 1) + j] ?? 0) >= (table[i * (m + 1) + j + 1] ?? 0))) {
        // Removed lines before the added ones that replace them, as diff tools show it.
        ops.push(["removed", midA[i] ?? ""]);
        i++;
      } else {
        ops.push(["added", midB[j] ?? ""]);
        j++;
      }
    }
  }
  for (const line of a.slice(a.length - tail)) ops.push(["same", line]);
  let oldNo = 1;
  let newNo = 1;
  const lines: DiffLine[] = ops.map(([kind, text]) => {
    const line: DiffLine = {
      kind,
      text,
      oldNo: kind === "added" ? null : oldNo,
      newNo: kind === "removed" ? null : newNo,
    };
    if (kind !== "added") oldNo++;
    if (kind !== "removed") newNo++;
    return line;
  });
  return count(path, lines);
}

function count(path: string, lines: DiffLine[]): FileDiff {
  return {
    path,
    lines,
    additions: lines.filter((l) => l.kind === "added").length,
    deletions: lines.filter((l) => l.kind === "removed").length,
  };
}

/** A unified diff (`git diff`, or hunks alone) split into files. */
export function parseUnified(text: string, fallbackPath = ""): FileDiff[] {
  const files: FileDiff[] = [];
  let current: DiffLine[] | null = null;
  let path = fallbackPath;
  let oldNo = 0;
  let newNo = 0;
  const start = (name: string): void => {
    if (current) files.push(count(path, current));
    current = [];
    path = name;
  };
  for (const raw of text.split("\n")) {
    const git = /^diff --git a\/(.*) b\/(.*)$/.exec(raw);
    if (git) {
      start(git[2] ?? "");
      continue;
    }
    if (raw.startsWith("+++ ")) {
      const name = raw.slice(4).replace(/^b\//, "");
      if (name !== "/dev/null") path = name;
      if (!current) start(path);
      continue;
    }
    if (raw.startsWith("--- ")) {
      if (!current) start(raw.slice(4).replace(/^a\//, ""));
      continue;
    }
    if (!current) start(path);
    const lines = current as unknown as DiffLine[];
    const hunk = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(raw);
    if (hunk) {
      oldNo = Number(hunk[1]);
      newNo = Number(hunk[2]);
      lines.push({ kind: "hunk", text: raw, oldNo: null, newNo: null });
    } else if (raw.startsWith("+")) {
      lines.push({ kind: "added", text: raw.slice(1), oldNo: null, newNo: newNo++ });
    } else if (raw.startsWith("-")) {
      lines.push({ kind: "removed", text: raw.slice(1), oldNo: oldNo++, newNo: null });
    } else if (raw.startsWith(" ")) {
      lines.push({ kind: "same", text: raw.slice(1), oldNo: oldNo++, newNo: newNo++ });
    } else if (raw !== "") {
      lines.push({ kind: "meta", text: raw, oldNo: null, newNo: null });
    }
  }
  if (current) files.push(count(path, current));
  return files.filter((file) => file.lines.length > 0 || file.path);
}

/** Rows of a side-by-side view: removed lines beside the added lines that replace them. */
export function sideBySide(lines: DiffLine[]): [DiffLine | null, DiffLine | null][] {
  const rows: [DiffLine | null, DiffLine | null][] = [];
  let removed: DiffLine[] = [];
  let added: DiffLine[] = [];
  const flush = (): void => {
    const size = Math.max(removed.length, added.length);
    for (let i = 0; i < size; i++) rows.push([removed[i] ?? null, added[i] ?? null]);
    removed = [];
    added = [];
  };
  for (const line of lines) {
    if (line.kind === "removed") removed.push(line);
    else if (line.kind === "added") added.push(line);
    else {
      flush();
      rows.push(line.kind === "same" ? [line, line] : [line, null]);
    }
  }
  flush();
  return rows;
}
