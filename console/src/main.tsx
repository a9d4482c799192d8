import { render } from "preact";

import "./styles/app.css";
import { App } from "./ui/App";
import { applyStoredTheme } from "./ui/Theme";

applyStoredTheme();
const root = document.getElementById("root");
if (root) {
  render(<App />, root);
  // Time to first render, for the browser tests and the README (performance.measure).
  requestAnimationFrame(() => performance.mark("console-rendered"));
}
