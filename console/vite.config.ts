// Builds the console into app/console/, the directory the gateway serves: index.html, app.js
// and app.css with fixed names (the gateway serves exactly these; a query string is not needed
// since it answers with Cache-Control: no-cache), no inline script or style (the strict CSP),
// nothing loaded from another origin.
import { defineConfig } from "vite";

export default defineConfig({
  base: "./",
  root: "src",
  publicDir: false,
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: {
    outDir: "../../app/console",
    emptyOutDir: true,
    target: "es2022",
    modulePreload: false,
    cssCodeSplit: false,
    assetsInlineLimit: 0,
    reportCompressedSize: true,
    rollupOptions: {
      output: {
        entryFileNames: "app.js",
        assetFileNames: "app[extname]",
        inlineDynamicImports: true,
      },
    },
  },
});
