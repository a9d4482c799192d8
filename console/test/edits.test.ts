import assert from "node:assert/strict";
import { test } from "node:test";

import { diffTexts, parseUnified, sideBySide } from "../src/diff";
import { fileEdits } from "../src/edits";

test("each agent's way of saying what it edits", () => {
  assert.deepEqual(fileEdits({ file_path: "/w/a.py", old_string: "x = 1\n", new_string: "x = 2\n" }), [
    { path: "/w/a.py", old: "x = 1\n", new: "x = 2\n", unified: null },
  ]);
  assert.deepEqual(fileEdits({ file_path: "/w/b.py", content: "print()\n" }), [
    { path: "/w/b.py", old: null, new: "print()\n", unified: null },
  ]);
  assert.deepEqual(
    fileEdits({ file_path: "/w/c.py", edits: [{ old_string: "a", new_string: "b" }, { old_string: "c", new_string: "d" }] }),
    [
      { path: "/w/c.py", old: "a", new: "b", unified: null },
      { path: "/w/c.py", old: "c", new: "d", unified: null },
    ],
  );
  // OpenCode, Copilot
  assert.deepEqual(fileEdits({ filePath: "/w/d.ts", oldString: "let", newString: "const" })[0]?.new, "const");
  assert.deepEqual(fileEdits({ path: "/w/e.md", file_text: "# E\n" })[0], { path: "/w/e.md", old: null, new: "# E\n", unified: null });
  assert.deepEqual(fileEdits({ filepath: "/w/f.txt", diff: "@@ -1 +1 @@\n-a\n+b\n" })[0]?.unified, "@@ -1 +1 @@\n-a\n+b\n");
  // Codex app-server (v2) and the Codex adapter
  assert.deepEqual(
    fileEdits({
      changes: [
        { path: "/w/new.txt", kind: { type: "add" }, diff: "hello\n" },
        { path: "/w/old.txt", kind: { type: "delete" }, diff: "bye\n" },
        { path: "/w/mod.txt", kind: { type: "update", move_path: null }, diff: "@@ -1 +1 @@\n-a\n+b\n" },
      ],
    }),
    [
      { path: "/w/new.txt", old: null, new: "hello\n", unified: null },
      { path: "/w/old.txt", old: "bye\n", new: "", unified: null },
      { path: "/w/mod.txt", old: null, new: null, unified: "@@ -1 +1 @@\n-a\n+b\n" },
    ],
  );
  assert.deepEqual(fileEdits({ changes: { "/w/g.txt": { type: "add", content: "g\n" } } }), [
    { path: "/w/g.txt", old: null, new: "g\n", unified: null },
  ]);
  // OpenCode's apply_patch
  const patch = ["*** Begin Patch", "*** Add File: n.py", "+one", "+two", "*** Update File: u.py", "@@", "-a", "+b", "*** End Patch"].join("\n");
  assert.deepEqual(fileEdits({ patchText: patch }), [
    { path: "n.py", old: null, new: "one\ntwo", unified: null },
    { path: "u.py", old: null, new: null, unified: "@@\n-a\n+b" },
  ]);
  // Not an edit: a command, a read, nothing.
  assert.deepEqual(fileEdits({ command: "ls" }), []);
  assert.deepEqual(fileEdits({ file_path: "/w/a.py" }), []);
  assert.deepEqual(fileEdits(null), []);
});

test("a text diff lists removed lines before the lines that replace them, numbered on each side", () => {
  const diff = diffTexts("a.py", "def f():\n    return 1\n\nf()\n", "def f(x):\n    return x\n\nf()\n");
  assert.deepEqual(
    diff.lines.map((l) => [l.kind, l.oldNo, l.newNo, l.text]),
    [
      ["removed", 1, null, "def f():"],
      ["removed", 2, null, "    return 1"],
      ["added", null, 1, "def f(x):"],
      ["added", null, 2, "    return x"],
      ["same", 3, 3, ""],
      ["same", 4, 4, "f()"],
    ],
  );
  assert.equal(diff.additions, 2);
  assert.equal(diff.deletions, 2);
  assert.deepEqual(diffTexts("n.txt", null, "a\nb\n").lines.map((l) => l.kind), ["added", "added"]);
  // Side by side: each removed line beside the line that replaces it.
  const rows = sideBySide(diff.lines);
  assert.deepEqual(rows[0]?.map((cell) => cell?.text), ["def f():", "def f(x):"]);
  assert.equal(rows.length, 4);
});

test("a git diff is split into files with their line numbers", () => {
  const text = [
    "diff --git a/x.txt b/x.txt",
    "--- a/x.txt",
    "+++ b/x.txt",
    "@@ -3,2 +3,2 @@",
    " keep",
    "-old",
    "+new",
    "diff --git a/y.txt b/y.txt",
    "new file mode 100644",
    "--- /dev/null",
    "+++ b/y.txt",
    "@@ -0,0 +1 @@",
    "+y",
  ].join("\n");
  const files = parseUnified(text);
  assert.deepEqual(files.map((f) => [f.path, f.additions, f.deletions]), [["x.txt", 1, 1], ["y.txt", 1, 0]]);
  assert.deepEqual(
    files[0]?.lines.map((l) => [l.kind, l.oldNo, l.newNo]),
    [["hunk", null, null], ["same", 3, 3], ["removed", 4, null], ["added", null, 4]],
  );
});
