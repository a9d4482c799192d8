/**
 * The agent's markdown as safe HTML: marked parses (raw HTML in the text stays text),
 * highlight.js colours code blocks (a few common languages), DOMPurify removes anything that
 * could run or load (scripts, event handlers, `javascript:` links, images from elsewhere —
 * the CSP would refuse them anyway).
 */
import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import css from "highlight.js/lib/languages/css";
import diff from "highlight.js/lib/languages/diff";
import go from "highlight.js/lib/languages/go";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import python from "highlight.js/lib/languages/python";
import rust from "highlight.js/lib/languages/rust";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";
import { Marked, type Tokens } from "marked";

const LANGUAGES = { bash, css, diff, go, javascript, json, python, rust, sql, typescript, xml, yaml };
for (const [name, language] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, language);
hljs.registerAliases(["sh", "shell", "zsh", "console"], { languageName: "bash" });
hljs.registerAliases(["js", "jsx", "mjs"], { languageName: "javascript" });
hljs.registerAliases(["ts", "tsx"], { languageName: "typescript" });
hljs.registerAliases(["py"], { languageName: "python" });
hljs.registerAliases(["html", "svg"], { languageName: "xml" });
hljs.registerAliases(["yml"], { languageName: "yaml" });
hljs.registerAliases(["patch"], { languageName: "diff" });

function escape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Code as highlighted HTML (escaped plain text for a language it does not know). */
export function highlight(code: string, language = ""): string {
  const name = language.trim().split(/\s+/)[0]?.toLowerCase() ?? "";
  if (name && hljs.getLanguage(name)) {
    return hljs.highlight(code, { language: name, ignoreIllegals: true }).value;
  }
  return escape(code);
}

export function languageOf(path: string): string {
  const extension = path.slice(path.lastIndexOf(".") + 1).toLowerCase();
  const known: Record<string, string> = {
    py: "python", ts: "typescript", tsx: "typescript", js: "javascript", mjs: "javascript",
    jsx: "javascript", json: "json", sh: "bash", bash: "bash", css: "css", html: "xml",
    xml: "xml", svg: "xml", yml: "yaml", yaml: "yaml", go: "go", rs: "rust", sql: "sql",
    diff: "diff", patch: "diff",
  };
  return known[extension] ?? "";
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    code({ text, lang }: Tokens.Code): string {
      const language = (lang ?? "").trim().split(/\s+/)[0] ?? "";
      const label = language ? `<span class="code-lang">${escape(language)}</span>` : "";
      return `<pre class="code">${label}<code class="hljs">${highlight(text, language)}</code></pre>\n`;
    },
    // Raw HTML in the agent's text is shown as the text it is, never parsed: an agent has no
    // reason to send markup, and a hostile attribute never reaches a parser (DOMPurify below
    // stays as the second line).
    html({ text }: Tokens.HTML | Tokens.Tag): string {
      return escape(text);
    },
    image({ href, text }: Tokens.Image): string {
      // Shown as a link: the page loads nothing from elsewhere.
      return `<a href="${escape(href)}">${escape(text || href)}</a>`;
    },
  },
});

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

const PURIFY = {
  FORBID_TAGS: ["img", "style", "form", "input", "button", "textarea", "select", "iframe", "svg", "math"],
  FORBID_ATTR: ["style", "id", "name"],
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
};

/** Sanitized HTML of `text` as markdown. */
export function renderMarkdown(text: string): string {
  const html = marked.parse(text, { async: false });
  return DOMPurify.sanitize(html, PURIFY);
}
